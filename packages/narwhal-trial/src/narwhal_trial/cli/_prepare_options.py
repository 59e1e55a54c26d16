"""``prepare``'s options, declared once as dataclass fields (``_declare``): the seed completion's,
and the schedule's (its rules: ``workload._schedule_options``); ``--speedup``, which ``run``,
``edge`` and ``predict`` share."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from narwhal_trial.cli._common_options import ApiKeyEnvOpt, BaseOpt, MaxModelLenOpt
from narwhal_trial.workload._arrivals import ArrivalKind
from narwhal_trial.workload._schedule_options import ScheduleOptions
from narwhal_trial.workload._trace import TraceFormat

_TRACE = "Trace replay"
_DRAWN = "Synthetic arrivals and lengths"


@dataclass(frozen=True, slots=True, kw_only=True)
class PrepareOptions:
    """``prepare``'s options for the seed completion: the server, the sampler and the lengths."""

    base: BaseOpt
    seed: Annotated[
        int, typer.Option("--seed", min=0, help="Sampler seed; request n uses seed + n.")
    ]
    out: Annotated[Path, typer.Option("--out", help="New folder for workload.json.")]
    input_tokens: Annotated[
        int | None,
        typer.Option(
            "--input-tokens", min=1, help="Prompt tokens of every request (the runbook: 8192)."
        ),
    ] = None
    output_tokens: Annotated[
        int | None,
        typer.Option(
            "--output-tokens", min=1, help="Output tokens of every request (the runbook: 128)."
        ),
    ] = None
    model: Annotated[
        str | None, typer.Option("--model", help="Served model (default: the only one).")
    ] = None
    api_key_env: ApiKeyEnvOpt = None
    max_model_len: MaxModelLenOpt = None
    tokenizer: Annotated[
        Path | None,
        typer.Option(
            "--tokenizer",
            metavar="DIR",
            help="The served model's folder (or its tokenizer.json), for a server that returns "
            "no token ids and has no /tokenize (NVIDIA Dynamo's frontend): the seed completion's "
            "text is re-tokenized here. Needs the tokenizers package "
            "(pip install 'narwhal-trial[tokenizer]').",
        ),
    ] = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ScheduleFlags:
    """``prepare``'s schedule options as given: a trace's window or synthetic draws."""

    trace: Annotated[
        Path | None,
        typer.Option(
            "--trace",
            metavar="FILE",
            rich_help_panel=_TRACE,
            help="A production trace whose requests become the workload, each with its own due "
            "time and lengths: Mooncake JSONL (timestamp ms, input_length, output_length, "
            "hash_ids), BurstGPT CSV (Timestamp s, Request tokens, Response tokens; failed rows "
            "dropped and counted) or the Azure LLM inference CSV (TIMESTAMP, ContextTokens, "
            "GeneratedTokens). Replay it with run --speedup.",
        ),
    ] = None
    trace_format: Annotated[
        TraceFormat | None,
        typer.Option(
            "--trace-format",
            rich_help_panel=_TRACE,
            help="The trace's format (default: told from its first line).",
        ),
    ] = None
    start_s: Annotated[
        float | None,
        typer.Option(
            "--start",
            metavar="S",
            rich_help_panel=_TRACE,
            help="The window's start, seconds after the trace's first request (default 0).",
        ),
    ] = None
    duration_s: Annotated[
        float | None,
        typer.Option(
            "--duration", metavar="S", rich_help_panel=_TRACE, help="The window's length, seconds."
        ),
    ] = None
    limit: Annotated[
        int | None,
        typer.Option(
            "--limit",
            metavar="N",
            rich_help_panel=_TRACE,
            help="Keep at most the window's first N requests.",
        ),
    ] = None
    block_tokens: Annotated[
        int | None,
        typer.Option(
            "--block-tokens",
            metavar="N",
            rich_help_panel=_TRACE,
            help="Tokens per Mooncake hash_ids block (default 512). Equal ids give identical token "
            "blocks, so a prefix cache sees the trace's reuse.",
        ),
    ] = None
    clip_to_model: Annotated[
        bool,
        typer.Option(
            "--clip-to-model",
            rich_help_panel=_TRACE,
            help="Clip requests longer than the served max_model_len (input shortened, output "
            "kept) instead of refusing the trace.",
        ),
    ] = False
    arrivals: Annotated[
        ArrivalKind | None,
        typer.Option(
            "--arrivals",
            rich_help_panel=_DRAWN,
            help="Draw a schedule of --requests at a mean --rate: constant spacing, poisson "
            "(exponential gaps) or gamma (gaps of coefficient of variation --burstiness), seeded "
            "by --seed. Replay it with run --speedup.",
        ),
    ] = None
    burstiness: Annotated[
        float | None,
        typer.Option(
            "--burstiness",
            metavar="CV",
            rich_help_panel=_DRAWN,
            help="Gamma arrivals: the gaps' coefficient of variation (1 is Poisson, above 1 "
            "bursty). Not vLLM's --burstiness, which is the gamma shape 1/CV^2.",
        ),
    ] = None
    rate: Annotated[
        float | None,
        typer.Option("--rate", rich_help_panel=_DRAWN, help="Mean requests per second to draw."),
    ] = None
    requests: Annotated[
        int | None,
        typer.Option("--requests", rich_help_panel=_DRAWN, help="Requests to draw."),
    ] = None
    input_lengths: Annotated[
        str | None,
        typer.Option(
            "--input-lengths",
            metavar="SPEC",
            rich_help_panel=_DRAWN,
            help="Prompt lengths drawn per request: N, uniform:LO-HI, normal:MEAN,SD or "
            "lognormal:MEDIAN,SIGMA (or a fixed --input-tokens).",
        ),
    ] = None
    output_lengths: Annotated[
        str | None,
        typer.Option(
            "--output-lengths",
            metavar="SPEC",
            rich_help_panel=_DRAWN,
            help="Output lengths drawn per request, as --input-lengths (or a fixed "
            "--output-tokens).",
        ),
    ] = None

    def options(self) -> ScheduleOptions:
        """The same values, for the rules that check them (``workload._schedule_options``)."""
        return ScheduleOptions(**{f.name: getattr(self, f.name) for f in dataclasses.fields(self)})
