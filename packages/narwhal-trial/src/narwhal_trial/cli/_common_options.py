"""The options several commands share, declared once as annotated types: where the server is,
how to reach it, the workload and its bounds, and ``--speedup``; and how a decimal option's
value is parsed (a usage error naming the flag)."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Annotated

import typer

from narwhal_trial._access import DEFAULT_API_KEY_ENV

ENV_BASE = "NARWHAL_TRIAL_URL"

BaseOpt = Annotated[
    str,
    typer.Option(
        "--base",
        envvar=ENV_BASE,
        show_envvar=True,
        help="Router or engine base URL (no user:password@ or query: keys go in --api-key-env).",
    ),
]
ApiKeyEnvOpt = Annotated[
    str | None,
    typer.Option(
        "--api-key-env",
        metavar="NAME",
        help="Environment variable holding the API key, sent as Authorization: Bearer on every "
        f"request (never the key itself on the command line). Default: {DEFAULT_API_KEY_ENV}, "
        "when set; otherwise no key is sent.",
    ),
]
MaxModelLenOpt = Annotated[
    int | None,
    typer.Option(
        "--max-model-len",
        min=1,
        help="The context limit, for a router that reports none in /v1/models, /tokenize or its "
        "metrics (NVIDIA Dynamo's dynamo_frontend_model_context_length); an error when the server "
        "reports a different one.",
    ),
]
WorkloadOpt = Annotated[Path, typer.Option("--workload", help="workload.json from prepare.")]
TtftOpt = Annotated[str, typer.Option("--ttft", help="TTFT bound, seconds.")]
TpotOpt = Annotated[str, typer.Option("--tpot", help="TPOT bound, seconds.")]
AttainmentOpt = Annotated[str, typer.Option("--attainment", help="Required good fraction.")]
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


def decimal_option(parse: Callable[[str, str], Decimal], text: str, flag: str) -> Decimal:
    """A decimal option's value, or typer's usage error naming ``flag``."""
    try:
        return parse(text, flag)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint=flag) from exc
