"""The command line, declared once: each option is a field of ``RawOptions`` whose annotation
carries its flag, metavar and help text, and whose default is the option's default. ``cli`` builds
the typer command's parameters from these fields (in this order, which is the ``--help`` order),
and ``_options.validate`` checks the values typer hands over.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

import typer

from narwhal_profile_cli._bounds import (
    DEFAULT_DECODE_CONCURRENCY,
    DEFAULT_DECODE_INPUT_LENS,
    DEFAULT_DECODE_REPEATS,
    DEFAULT_DECODE_TOKENS,
    DEFAULT_MIXING_CONCURRENCY,
    DEFAULT_MIXING_PREFILLS,
    DEFAULT_MIXING_REPEATS,
    DEFAULT_PREFILL_LENS,
    DEFAULT_PREFILL_REPEATS,
    DEFAULT_THRESHOLD,
    MAX_DECODE_CONCURRENCY,
    MAX_DECODE_REPEATS,
    MAX_DECODE_TOKENS,
    MAX_MIXING_PREFILLS,
    MAX_MIXING_REPEATS,
    MAX_PREFILL_REPEATS,
    MAX_RATE,
    MAX_TOKENS,
    MIN_DECODE_REPEATS,
    MIN_DECODE_TOKENS,
    MIN_MIXING_LENS,
    MIN_PREFILL_REPEATS,
)

_SWEEP = "Prefill and decode sweeps"
_NEIGHBOURS = "Shared-GPU neighbour traffic"
_MIXING = "Mixing point (--mixing, opt-in)"


def _option(flag: str, text: str, metavar: str | None = None, panel: str | None = None) -> Any:
    """The typer declaration of one option (``panel``: its help panel, None for the main one)."""
    return typer.Option(flag, metavar=metavar, help=text, rich_help_panel=panel)


def _sweep(flag: str, metavar: str, text: str) -> Any:
    return _option(flag, text, metavar, _SWEEP)


def _neighbour(flag: str, metavar: str, text: str) -> Any:
    return _option(flag, text, metavar, _NEIGHBOURS)


def _mixing(flag: str, metavar: str | None, text: str) -> Any:
    return _option(flag, text, metavar, _MIXING)


@dataclass(frozen=True, slots=True)
class RawOptions:
    """The command line as typer hands it over: strings, so every check can name its option."""

    fleet: Annotated[
        str | None,
        _option(
            "--fleet",
            "Fleet config JSON; defines engine membership for every mode. Required.",
            "PATH",
        ),
    ] = None
    only: Annotated[
        list[str] | None,
        _option("--only", "Repeatable engine selector for live sweeps.", "IID"),
    ] = None
    refit_samples: Annotated[
        str | None,
        _option(
            "--refit-samples",
            "Refit TTFT from saved generation-bound samples while retaining decode fits.",
            "PATH",
        ),
    ] = None
    merge: Annotated[
        list[str] | None,
        _option(
            "--merge",
            "Repeat at least twice to combine measured profile stores and their sidecars.",
            "PATH",
        ),
    ] = None
    verify: Annotated[
        str | None,
        _option(
            "--verify",
            "Probe each engine's speed against its profile in this store (a few of the "
            "profile's own points, re-measured) and write the drift to --out; exit 3 when an "
            "engine drifted past --threshold.",
            "STORE",
        ),
    ] = None
    out: Annotated[
        str | None,
        _option(
            "--out",
            "Fresh destination: the profile store of --refit-samples and --merge, the probe "
            "document of --verify.",
            "PATH",
        ),
    ] = None
    threshold: Annotated[
        str | None,
        _option(
            "--threshold",
            f"With --verify: the drift past which an engine fails, a fraction between 0 and 1 "
            f"(default {DEFAULT_THRESHOLD}: 10 %).",
            "X",
        ),
    ] = None
    limits: Annotated[
        str | None,
        _option(
            "--limits",
            "Generated per-engine max_num_seqs limits applied to live decode cohorts.",
            "PATH",
        ),
    ] = None
    overwrite: Annotated[bool, _option("--overwrite", "Replace live profile and sample files.")] = (
        False
    )
    output_format: Annotated[
        str, _option("--format", "Select json for versioned results.", "text|json")
    ] = "text"
    prefill_lens: Annotated[
        str,
        _sweep(
            "--prefill-lens",
            "LIST",
            f"Comma-separated candidate lengths (three distinct or more, at most {MAX_TOKENS}).",
        ),
    ] = DEFAULT_PREFILL_LENS
    decode_input_lens: Annotated[
        str,
        _sweep(
            "--decode-input-lens",
            "LIST",
            f"Comma-separated decode prompt lengths (two distinct or more, at most {MAX_TOKENS}).",
        ),
    ] = DEFAULT_DECODE_INPUT_LENS
    decode_concurrency: Annotated[
        str,
        _sweep(
            "--decode-concurrency",
            "LIST",
            "Candidate stream counts (at least two distinct, "
            f"each at most {MAX_DECODE_CONCURRENCY}).",
        ),
    ] = DEFAULT_DECODE_CONCURRENCY
    decode_tokens: Annotated[
        str,
        _sweep(
            "--decode-tokens",
            "N",
            f"Tokens per decode stream, {MIN_DECODE_TOKENS} to {MAX_DECODE_TOKENS}.",
        ),
    ] = DEFAULT_DECODE_TOKENS
    prefill_repeats: Annotated[
        str,
        _sweep(
            "--prefill-repeats",
            "N",
            f"Repetitions per prefill length, {MIN_PREFILL_REPEATS} to {MAX_PREFILL_REPEATS}.",
        ),
    ] = DEFAULT_PREFILL_REPEATS
    decode_repeats: Annotated[
        str,
        _sweep(
            "--decode-repeats",
            "N",
            "Repetitions per decode input-length/concurrency point, "
            f"{MIN_DECODE_REPEATS} to {MAX_DECODE_REPEATS}.",
        ),
    ] = DEFAULT_DECODE_REPEATS
    mixing: Annotated[
        bool,
        _mixing(
            "--mixing",
            None,
            "After the decode sweep, measure how much of a prefill's time lands on the streams "
            "an engine is decoding (the predictor needs it to simulate mixed load). Per decode "
            "input length and mixing length: --mixing-concurrency streams decode; after a quiet "
            "stretch (20 of their intervals, at least 0.1 s) --mixing-prefills one-token "
            "prompts arrive 3 TTFTs apart; the time the streams lose per prefill is fitted as "
            "share*(b*L + c*L^2) + step_s*chunks. Cost per point: the streams' ramp, 2 quiet "
            "stretches and prefills x 3 TTFT(L); with the defaults about 12 TTFTs of the longest "
            "prefill length per decode input length (an 8B model on one H200: ~35 s an engine, "
            "as long again as the rest of the sweep). Writes store and sidecar format_version "
            "2; without it they stay format_version 1.",
        ),
    ] = False
    mixing_lens: Annotated[
        str | None,
        _mixing(
            "--mixing-lens",
            "LIST",
            f"Prefill lengths injected (at least {MIN_MIXING_LENS} distinct, at most "
            f"{MAX_TOKENS}; default: the smallest and the largest kept prefill length).",
        ),
    ] = None
    mixing_concurrency: Annotated[
        str | None,
        _mixing(
            "--mixing-concurrency",
            "N",
            f"Decode streams per mixing point (default {DEFAULT_MIXING_CONCURRENCY}, at most "
            f"{MAX_DECODE_CONCURRENCY}; under --limits at most max_num_seqs - 1, leaving the "
            "prefill a slot).",
        ),
    ] = None
    mixing_prefills: Annotated[
        str | None,
        _mixing(
            "--mixing-prefills",
            "N",
            f"Prefills injected per mixing point (default {DEFAULT_MIXING_PREFILLS}, at most "
            f"{MAX_MIXING_PREFILLS}).",
        ),
    ] = None
    mixing_repeats: Annotated[
        str | None,
        _mixing(
            "--mixing-repeats",
            "N",
            f"Repetitions per mixing point (default {DEFAULT_MIXING_REPEATS}, at most "
            f"{MAX_MIXING_REPEATS}).",
        ),
    ] = None
    colocated: Annotated[
        bool,
        _option(
            "--colocated",
            "Measure each target with traffic on peers in its shared GPU group.",
            panel=_NEIGHBOURS,
        ),
    ] = False
    neighbour_prefill_rps: Annotated[
        str | None,
        _neighbour(
            "--neighbour-prefill-rps",
            "RATE",
            f"Offered requests per second per prefill neighbour (at most {MAX_RATE:g}).",
        ),
    ] = None
    neighbour_decode_rps: Annotated[
        str | None,
        _neighbour(
            "--neighbour-decode-rps",
            "RATE",
            f"Offered requests per second per decode neighbour (at most {MAX_RATE:g}).",
        ),
    ] = None
    neighbour_prefill_tokens: Annotated[
        str | None,
        _neighbour(
            "--neighbour-prefill-tokens",
            "N",
            "Input tokens per prefill neighbour request (one output token).",
        ),
    ] = None
    neighbour_decode_input_tokens: Annotated[
        str | None,
        _neighbour(
            "--neighbour-decode-input-tokens", "N", "Input tokens per decode neighbour request."
        ),
    ] = None
    neighbour_decode_output_tokens: Annotated[
        str | None,
        _neighbour(
            "--neighbour-decode-output-tokens", "N", "Output tokens per decode neighbour request."
        ),
    ] = None
    parallel_groups: Annotated[
        str | None,
        _option(
            "--parallel-groups",
            "Measure engines of up to N different shared_device groups at once (default 1).",
            "N",
        ),
    ] = None
    shard: Annotated[
        str | None,
        _option(
            "--shard",
            "Measure share K of M of the fleet's GPU groups, each group whole. auto: share "
            "JOB_COMPLETION_INDEX+1 of NARWHAL_SHARD_COUNT (a Kubernetes Indexed Job; set "
            "NARWHAL_SHARD_COUNT to the Job's spec.completions).",
            "K/M|auto",
        ),
    ] = None
    keepalive_expiry: Annotated[
        str | None,
        _option(
            "--keepalive-expiry",
            "An idle kept-alive connection older than this is never reused (default 4, the "
            "engine client's DEFAULT_KEEPALIVE_EXPIRY_S: below vLLM's 5 s idle close; keep it "
            "below the engine's own). A request the engine closed its connection on "
            "unanswered is sent once more on a new connection; a point that fails for a "
            "transport reason is measured once more on new connections (the sidecar records "
            "both).",
            "SECONDS",
        ),
    ] = None
