"""The options ``run`` and ``edge`` share, declared once, and the ``RunSettings`` they make.

``edge`` runs every trial as ``run`` would, so both take the same client, drain and access
options with the same help and defaults; ``run_settings`` turns them into ``RunSettings``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Literal

import typer

from narwhal_engine_client import DEFAULT_KEEPALIVE_EXPIRY_S
from narwhal_trial._access import DEFAULT_API_KEY_ENV
from narwhal_trial._limits import DEFAULT_MAX_IN_FLIGHT, MAX_IN_FLIGHT
from narwhal_trial._stats import parse_fraction, parse_seconds
from narwhal_trial.run._drain import DEFAULT_PRESET, DRAIN_PRESETS, DrainPreset
from narwhal_trial.run._event_loop import DEFAULT_LOOP, LoopChoice
from narwhal_trial.run._settings import RunSettings

ENV_BASE = "NARWHAL_TRIAL_URL"
PRESET_HELP = "; ".join(
    f"{name}: {', '.join(gauges) or 'no drain check'}" for name, gauges in DRAIN_PRESETS.items()
)
Transport = Literal["auto", "raw", "httpx"]

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
MaxInFlightOpt = Annotated[
    int,
    typer.Option(
        "--max-in-flight",
        help=f"Offers due while this many are in flight are misses (1 to {MAX_IN_FLIGHT}).",
    ),
]
MaxLagOpt = Annotated[
    float,
    typer.Option("--max-lag", help="Seconds after its due time an offer may still be sent."),
]
RequestTimeoutOpt = Annotated[
    float, typer.Option("--request-timeout", help="Seconds before a request counts as a timeout.")
]
DrainTimeoutOpt = Annotated[
    float, typer.Option("--drain-timeout", help="Seconds to wait for the fleet to drain.")
]
KeepaliveExpiryOpt = Annotated[
    float,
    typer.Option(
        "--keepalive-expiry",
        metavar="SECONDS",
        help="An idle kept-alive connection older than this is never reused: keep it below "
        "the server's own idle timeout (vLLM closes idle connections after 5 s). A request "
        "written on a reused connection that the server closes before answering is sent "
        "once more on a new connection, within --max-lag, and its record says so.",
    ),
]
DrainPresetOpt = Annotated[
    DrainPreset | None,
    typer.Option(
        "--drain-preset",
        help=f"The drain gauges of what stands at --base (default {DEFAULT_PRESET}): "
        f"{PRESET_HELP}.",
    ),
]
DrainGaugeOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--drain-gauge", help="Gauge that must read 0 (repeat; instead of --drain-preset)."
    ),
]
TransportOpt = Annotated[
    Transport,
    typer.Option(
        "--transport",
        help="What carries the streaming requests: raw (the engine client's own HTTP/1.1 "
        "transport: a quarter of httpx's CPU per chunk; http:// only) or httpx; auto picks "
        "raw for http:// and httpx for https://.",
    ),
]
LoopOpt = Annotated[
    LoopChoice,
    typer.Option(
        "--loop",
        help="The client's event loop: asyncio (the standard library's; the default, measured "
        "no slower here) or uvloop (needs uvloop installed, as every vLLM environment has it); "
        "auto picks uvloop when it can be imported. The manifest records the loop used "
        "(event_loop).",
    ),
]
LaunchRecordOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--launch-record",
        help="An engine's launch record (its `vllm serve` command line, showing "
        "--no-enable-prefix-caching), copied into each run folder's launch-records/ and its "
        "SHA-256 into the manifest (repeat).",
    ),
]

#: The defaults of the options above that have one.
MAX_IN_FLIGHT_DEFAULT = DEFAULT_MAX_IN_FLIGHT
MAX_LAG_DEFAULT_S = 0.050
REQUEST_TIMEOUT_DEFAULT_S = 300.0
DRAIN_TIMEOUT_DEFAULT_S = 600.0
KEEPALIVE_EXPIRY_DEFAULT_S = DEFAULT_KEEPALIVE_EXPIRY_S


def decimal_option(parse: Callable[[str, str], Decimal], text: str, flag: str) -> Decimal:
    """A decimal option's value, or typer's usage error naming ``flag``."""
    try:
        return parse(text, flag)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint=flag) from exc


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientOptions:
    """The shared options as given, before they become ``RunSettings``."""

    max_in_flight: int
    max_lag: float
    request_timeout: float
    drain_timeout: float
    keepalive_expiry: float
    drain_preset: DrainPreset | None
    drain_gauge: list[str] | None
    transport: Transport
    api_key_env: str | None
    max_model_len: int | None
    launch_record: list[Path] | None
    loop: LoopChoice = DEFAULT_LOOP


def run_settings(
    *,
    base: str,
    workload: Path,
    rate: float,
    requests: int,
    bounds: tuple[str, str, str],
    out: Path,
    client: ClientOptions,
    command: tuple[str, ...],
    launcher: Path | None,
) -> RunSettings:
    """``RunSettings`` from the shared options; ``bounds`` is (--ttft, --tpot, --attainment)."""
    ttft, tpot, attainment = bounds
    return RunSettings(
        base_url=base,
        workload_path=workload,
        rate=rate,
        requests=requests,
        ttft_s=decimal_option(parse_seconds, ttft, "--ttft"),
        tpot_s=decimal_option(parse_seconds, tpot, "--tpot"),
        attainment=decimal_option(parse_fraction, attainment, "--attainment"),
        out=out,
        max_in_flight=client.max_in_flight,
        max_lag_s=client.max_lag,
        request_timeout_s=client.request_timeout,
        drain_timeout_s=client.drain_timeout,
        keepalive_expiry_s=client.keepalive_expiry,
        drain_gauges=tuple(client.drain_gauge or ()),
        drain_preset=client.drain_preset,
        transport=client.transport,
        command=command,
        launcher=launcher,
        api_key_env=client.api_key_env,
        max_model_len=client.max_model_len,
        launch_records=tuple(client.launch_record or ()),
        loop=client.loop,
    )
