"""``prepare``'s schedule options, as typer option types (rules: ``workload._schedule_options``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from narwhal_trial.workload._arrivals import ArrivalKind
from narwhal_trial.workload._trace import TraceFormat

_TRACE = "Trace replay"
_DRAWN = "Synthetic arrivals and lengths"

TraceOpt = Annotated[
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
]
TraceFormatOpt = Annotated[
    TraceFormat | None,
    typer.Option(
        "--trace-format",
        rich_help_panel=_TRACE,
        help="The trace's format (default: told from its first line).",
    ),
]
StartOpt = Annotated[
    float | None,
    typer.Option(
        "--start",
        metavar="S",
        rich_help_panel=_TRACE,
        help="The window's start, seconds after the trace's first request (default 0).",
    ),
]
DurationOpt = Annotated[
    float | None,
    typer.Option(
        "--duration", metavar="S", rich_help_panel=_TRACE, help="The window's length, seconds."
    ),
]
LimitOpt = Annotated[
    int | None,
    typer.Option(
        "--limit",
        metavar="N",
        rich_help_panel=_TRACE,
        help="Keep at most the window's first N requests.",
    ),
]
BlockTokensOpt = Annotated[
    int | None,
    typer.Option(
        "--block-tokens",
        metavar="N",
        rich_help_panel=_TRACE,
        help="Tokens per Mooncake hash_ids block (default 512). Equal ids give identical token "
        "blocks, so a prefix cache sees the trace's reuse.",
    ),
]
ClipOpt = Annotated[
    bool,
    typer.Option(
        "--clip-to-model",
        rich_help_panel=_TRACE,
        help="Clip requests longer than the served max_model_len (input shortened, output "
        "kept) instead of refusing the trace.",
    ),
]
ArrivalsOpt = Annotated[
    ArrivalKind | None,
    typer.Option(
        "--arrivals",
        rich_help_panel=_DRAWN,
        help="Draw a schedule of --requests at a mean --rate: constant spacing, poisson "
        "(exponential gaps) or gamma (gaps of coefficient of variation --burstiness), seeded "
        "by --seed. Replay it with run --speedup.",
    ),
]
BurstinessOpt = Annotated[
    float | None,
    typer.Option(
        "--burstiness",
        metavar="CV",
        rich_help_panel=_DRAWN,
        help="Gamma arrivals: the gaps' coefficient of variation (1 is Poisson, above 1 "
        "bursty). Not vLLM's --burstiness, which is the gamma shape 1/CV^2.",
    ),
]
RateOpt = Annotated[
    float | None,
    typer.Option("--rate", rich_help_panel=_DRAWN, help="Mean requests per second to draw."),
]
RequestsOpt = Annotated[
    int | None,
    typer.Option("--requests", rich_help_panel=_DRAWN, help="Requests to draw."),
]
InputLengthsOpt = Annotated[
    str | None,
    typer.Option(
        "--input-lengths",
        metavar="SPEC",
        rich_help_panel=_DRAWN,
        help="Prompt lengths drawn per request: N, uniform:LO-HI, normal:MEAN,SD or "
        "lognormal:MEDIAN,SIGMA (or a fixed --input-tokens).",
    ),
]
OutputLengthsOpt = Annotated[
    str | None,
    typer.Option(
        "--output-lengths",
        metavar="SPEC",
        rich_help_panel=_DRAWN,
        help="Output lengths drawn per request, as --input-lengths (or a fixed --output-tokens).",
    ),
]
SpeedupOpt = Annotated[
    float | None,
    typer.Option(
        "--speedup",
        metavar="X",
        help="A scheduled workload (prepare --trace or --arrivals): divide its time axis by X "
        "(2: twice as fast; default 1, its own pace; at most 1000). Refused for the runbook's "
        "workload, which runs at --rate.",
    ),
]
