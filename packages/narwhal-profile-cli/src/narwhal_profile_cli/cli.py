"""The ``narwhal-profile`` command: a thin typer shell over the modes (docs/design.md §8).

Only this layer turns errors into exit codes and one-line messages (or the JSON result).
"""

from __future__ import annotations

import contextlib
import os
import sys
import traceback
from collections.abc import Sequence
from importlib import metadata
from typing import Annotated

import typer

from narwhal_profile_cli._errors import ProfileError, ProfileInterrupted, ProfileUsageError
from narwhal_profile_cli._options import (
    DEFAULT_DECODE_CONCURRENCY,
    DEFAULT_DECODE_INPUT_LENS,
    DEFAULT_DECODE_REPEATS,
    DEFAULT_DECODE_TOKENS,
    DEFAULT_PREFILL_LENS,
    DEFAULT_PREFILL_REPEATS,
    MAX_DECODE_CONCURRENCY,
    MAX_DECODE_REPEATS,
    MAX_DECODE_TOKENS,
    MAX_PREFILL_REPEATS,
    MAX_RATE,
    MAX_TOKENS,
    MIN_DECODE_REPEATS,
    MIN_DECODE_TOKENS,
    MIN_PREFILL_REPEATS,
    OutputFormat,
    RawOptions,
    validate,
)
from narwhal_profile_cli._result import DISTRIBUTION, PROG, CommandResult, emit

_SWEEP = "Prefill and decode sweeps"
_NEIGHBOURS = "Shared-GPU neighbour traffic"


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"{PROG} ({DISTRIBUTION}) {metadata.version(DISTRIBUTION)}")
        raise typer.Exit(0)


def profile(
    fleet: Annotated[
        str | None,
        typer.Option(
            "--fleet",
            metavar="PATH",
            help="Fleet config JSON; defines engine membership for all three modes. Required.",
        ),
    ] = None,
    only: Annotated[
        list[str] | None,
        typer.Option("--only", metavar="IID", help="Repeatable engine selector for live sweeps."),
    ] = None,
    refit_samples: Annotated[
        str | None,
        typer.Option(
            "--refit-samples",
            metavar="PATH",
            help="Refit TTFT from saved generation-bound samples while retaining decode fits.",
        ),
    ] = None,
    merge: Annotated[
        list[str] | None,
        typer.Option(
            "--merge",
            metavar="PATH",
            help="Repeat at least twice to combine measured profile stores and their sidecars.",
        ),
    ] = None,
    out: Annotated[
        str | None,
        typer.Option(
            "--out",
            metavar="PATH",
            help="Fresh profile destination for --refit-samples and --merge.",
        ),
    ] = None,
    limits: Annotated[
        str | None,
        typer.Option(
            "--limits",
            metavar="PATH",
            help="Generated per-engine max_num_seqs limits applied to live decode cohorts.",
        ),
    ] = None,
    overwrite: Annotated[
        bool,
        typer.Option("--overwrite", help="Replace live profile and sample files."),
    ] = False,
    output_format: Annotated[
        str,
        typer.Option("--format", metavar="text|json", help="Select json for versioned results."),
    ] = "text",
    prefill_lens: Annotated[
        str,
        typer.Option(
            "--prefill-lens",
            metavar="LIST",
            rich_help_panel=_SWEEP,
            help="Comma-separated candidate lengths (three distinct or more, "
            f"at most {MAX_TOKENS}).",
        ),
    ] = DEFAULT_PREFILL_LENS,
    decode_input_lens: Annotated[
        str,
        typer.Option(
            "--decode-input-lens",
            metavar="LIST",
            rich_help_panel=_SWEEP,
            help="Comma-separated decode prompt lengths (two distinct or more, "
            f"at most {MAX_TOKENS}).",
        ),
    ] = DEFAULT_DECODE_INPUT_LENS,
    decode_concurrency: Annotated[
        str,
        typer.Option(
            "--decode-concurrency",
            metavar="LIST",
            rich_help_panel=_SWEEP,
            help="Candidate stream counts (at least two distinct, "
            f"each at most {MAX_DECODE_CONCURRENCY}).",
        ),
    ] = DEFAULT_DECODE_CONCURRENCY,
    decode_tokens: Annotated[
        str,
        typer.Option(
            "--decode-tokens",
            metavar="N",
            rich_help_panel=_SWEEP,
            help=f"Tokens per decode stream, {MIN_DECODE_TOKENS} to {MAX_DECODE_TOKENS}.",
        ),
    ] = DEFAULT_DECODE_TOKENS,
    prefill_repeats: Annotated[
        str,
        typer.Option(
            "--prefill-repeats",
            metavar="N",
            rich_help_panel=_SWEEP,
            help=f"Repetitions per prefill length, {MIN_PREFILL_REPEATS} to {MAX_PREFILL_REPEATS}.",
        ),
    ] = DEFAULT_PREFILL_REPEATS,
    decode_repeats: Annotated[
        str,
        typer.Option(
            "--decode-repeats",
            metavar="N",
            rich_help_panel=_SWEEP,
            help=f"Repetitions per decode input-length/concurrency point, {MIN_DECODE_REPEATS} to "
            f"{MAX_DECODE_REPEATS}.",
        ),
    ] = DEFAULT_DECODE_REPEATS,
    colocated: Annotated[
        bool,
        typer.Option(
            "--colocated",
            rich_help_panel=_NEIGHBOURS,
            help="Measure each target with traffic on peers in its shared GPU group.",
        ),
    ] = False,
    neighbour_prefill_rps: Annotated[
        str | None,
        typer.Option(
            "--neighbour-prefill-rps",
            metavar="RATE",
            rich_help_panel=_NEIGHBOURS,
            help=f"Offered requests per second per prefill neighbour (at most {MAX_RATE:g}).",
        ),
    ] = None,
    neighbour_decode_rps: Annotated[
        str | None,
        typer.Option(
            "--neighbour-decode-rps",
            metavar="RATE",
            rich_help_panel=_NEIGHBOURS,
            help=f"Offered requests per second per decode neighbour (at most {MAX_RATE:g}).",
        ),
    ] = None,
    neighbour_prefill_tokens: Annotated[
        str | None,
        typer.Option(
            "--neighbour-prefill-tokens",
            metavar="N",
            rich_help_panel=_NEIGHBOURS,
            help="Input tokens per prefill neighbour request (one output token).",
        ),
    ] = None,
    neighbour_decode_input_tokens: Annotated[
        str | None,
        typer.Option(
            "--neighbour-decode-input-tokens",
            metavar="N",
            rich_help_panel=_NEIGHBOURS,
            help="Input tokens per decode neighbour request.",
        ),
    ] = None,
    neighbour_decode_output_tokens: Annotated[
        str | None,
        typer.Option(
            "--neighbour-decode-output-tokens",
            metavar="N",
            rich_help_panel=_NEIGHBOURS,
            help="Output tokens per decode neighbour request.",
        ),
    ] = None,
    parallel_groups: Annotated[
        str | None,
        typer.Option(
            "--parallel-groups",
            metavar="N",
            help="Measure engines of up to N different shared_device groups at once (default 1).",
        ),
    ] = None,
    shard: Annotated[
        str | None,
        typer.Option(
            "--shard",
            metavar="K/M",
            help="Measure share K of M of the fleet's GPU groups, each group whole.",
        ),
    ] = None,
    keepalive_expiry: Annotated[
        str | None,
        typer.Option(
            "--keepalive-expiry",
            metavar="SECONDS",
            help="An idle kept-alive connection older than this is never reused (default 4, the "
            "engine client's DEFAULT_KEEPALIVE_EXPIRY_S: below vLLM's 5 s idle close; keep it "
            "below the engine's own). A request the engine closed its connection on "
            "unanswered is sent once more on a new connection; a point that fails for a "
            "transport reason is measured once more on new connections (the sidecar records "
            "both).",
        ),
    ] = None,
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            is_eager=True,
            callback=_version_callback,
            help="Print the installed distribution version.",
        ),
    ] = False,
) -> None:
    """Measure live engines into the fleet's profiles.path, refit TTFT, or merge role mixes."""
    del version
    raw = RawOptions(
        output_format=output_format,
        fleet=fleet,
        only=tuple(only or ()),
        refit_samples=refit_samples,
        merge=tuple(merge or ()),
        out=out,
        limits=limits,
        overwrite=overwrite,
        prefill_lens=prefill_lens,
        decode_input_lens=decode_input_lens,
        decode_concurrency=decode_concurrency,
        decode_tokens=decode_tokens,
        prefill_repeats=prefill_repeats,
        decode_repeats=decode_repeats,
        colocated=colocated,
        neighbour_prefill_rps=neighbour_prefill_rps,
        neighbour_decode_rps=neighbour_decode_rps,
        neighbour_prefill_tokens=neighbour_prefill_tokens,
        neighbour_decode_input_tokens=neighbour_decode_input_tokens,
        neighbour_decode_output_tokens=neighbour_decode_output_tokens,
        parallel_groups=parallel_groups,
        shard=shard,
        keepalive_expiry=keepalive_expiry,
    )
    result = CommandResult()
    fmt: OutputFormat = "json" if output_format == "json" else "text"
    try:
        options = validate(raw)
        # The modes (httpx, numpy, scipy, pydantic) load only now: --version and --help stay fast.
        from narwhal_profile_cli._run import execute

        execute(options, result, stderr=sys.stderr)
    except ProfileError as exc:
        result.error = exc
    except KeyboardInterrupt:  # outside a live sweep, which reports its kept profiles itself
        result.error = ProfileInterrupted("interrupted")
    except Exception as exc:
        traceback.print_exc(file=sys.stderr)
        result.error = ProfileError(
            f"unexpected {type(exc).__name__}: {exc}", code="internal_error"
        )
    raise typer.Exit(emit(result, fmt, stdout=sys.stdout, stderr=sys.stderr))


def _wants_json(args: Sequence[str]) -> bool:
    """Whether the command line asks for ``--format json`` (used for errors typer raises itself)."""
    for index, arg in enumerate(args):
        if arg == "--format=json" or (
            arg == "--format" and index + 1 < len(args) and args[index + 1] == "json"
        ):
            return True
    return False


def run(argv: Sequence[str] | None = None) -> int:
    """Run the command with ``argv`` (default: ``sys.argv[1:]``) and return the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None)
    app.command(context_settings={"help_option_names": ["-h", "--help"]})(profile)
    command = typer.main.get_command(app)
    try:
        code = command.main(args, prog_name=PROG, standalone_mode=False)
    except typer.TyperException as exc:  # usage errors raised by typer itself (unknown option, ...)
        error = ProfileUsageError(exc.format_message())
        return emit(
            CommandResult(error=error),
            "json" if _wants_json(args) else "text",
            stdout=sys.stdout,
            stderr=sys.stderr,
        )
    except typer.Abort:
        return 130
    return code if isinstance(code, int) else 0


def main() -> None:
    """Console-script entry point: run, flush, and exit without the interpreter's teardown.

    Every output is written (atomically) and every stream closed by then; unloading numpy, scipy
    and a sweep's objects only added 0.15-0.3 s to the operator's wait. ``run`` is the
    entry for callers that stay in the process.
    """
    code = run()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe or stream: nothing to flush
            stream.flush()
    os._exit(code)
