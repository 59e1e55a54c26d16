"""The options ``run`` and ``edge`` share, declared once, and the ``RunSettings`` they make.

``edge`` runs every trial as ``run`` would, so both take the same client, drain and access
options with the same help and defaults; ``run_settings`` turns them into ``RunSettings``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

import typer

from narwhal_engine_client import DEFAULT_KEEPALIVE_EXPIRY_S
from narwhal_trial._limits import DEFAULT_MAX_IN_FLIGHT, MAX_IN_FLIGHT, MAX_RATE, MAX_REQUESTS
from narwhal_trial._stats import parse_fraction, parse_seconds
from narwhal_trial.cli._common_options import (
    ApiKeyEnvOpt,
    AttainmentOpt,
    BaseOpt,
    MaxModelLenOpt,
    SpeedupOpt,
    TpotOpt,
    TtftOpt,
    WorkloadOpt,
    decimal_option,
)
from narwhal_trial.cli._invocation import Invocation
from narwhal_trial.run._drain import DEFAULT_PRESET, DRAIN_PRESETS, DrainPreset
from narwhal_trial.run._event_loop import DEFAULT_LOOP, LoopChoice
from narwhal_trial.run._settings import RunSettings

PRESET_HELP = "; ".join(
    f"{name}: {', '.join(gauges) or 'no drain check'}" for name, gauges in DRAIN_PRESETS.items()
)
Transport = Literal["auto", "raw", "httpx"]


@dataclass(frozen=True, slots=True, kw_only=True)
class TrialOptions:
    """What a trial is offered to and judged by: ``run``'s and ``edge``'s first options."""

    base: BaseOpt
    workload: WorkloadOpt
    ttft: TtftOpt
    tpot: TpotOpt
    attainment: AttainmentOpt


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientOptions:
    """The client's, the drain's and the access options ``run`` and ``edge`` share."""

    max_in_flight: Annotated[
        int,
        typer.Option(
            "--max-in-flight",
            help=f"Offers due while this many are in flight are misses (1 to {MAX_IN_FLIGHT}).",
        ),
    ] = DEFAULT_MAX_IN_FLIGHT
    max_lag: Annotated[
        float,
        typer.Option("--max-lag", help="Seconds after its due time an offer may still be sent."),
    ] = 0.050
    request_timeout: Annotated[
        float,
        typer.Option("--request-timeout", help="Seconds before a request counts as a timeout."),
    ] = 300.0
    drain_timeout: Annotated[
        float, typer.Option("--drain-timeout", help="Seconds to wait for the fleet to drain.")
    ] = 600.0
    keepalive_expiry: Annotated[
        float,
        typer.Option(
            "--keepalive-expiry",
            metavar="SECONDS",
            help="An idle kept-alive connection older than this is never reused: keep it below "
            "the server's own idle timeout (vLLM closes idle connections after 5 s). A request "
            "written on a reused connection that the server closes before answering is sent "
            "once more on a new connection, within --max-lag, and its record says so.",
        ),
    ] = DEFAULT_KEEPALIVE_EXPIRY_S
    drain_preset: Annotated[
        DrainPreset | None,
        typer.Option(
            "--drain-preset",
            help=f"The drain gauges of what stands at --base (default {DEFAULT_PRESET}): "
            f"{PRESET_HELP}.",
        ),
    ] = None
    drain_gauge: Annotated[
        list[str] | None,
        typer.Option(
            "--drain-gauge", help="Gauge that must read 0 (repeat; instead of --drain-preset)."
        ),
    ] = None
    transport: Annotated[
        Transport,
        typer.Option(
            "--transport",
            help="What carries the streaming requests: raw (the engine client's own HTTP/1.1 "
            "transport: a quarter of httpx's CPU per chunk; http:// only) or httpx; auto picks "
            "raw for http:// and httpx for https://.",
        ),
    ] = "auto"
    loop: Annotated[
        LoopChoice,
        typer.Option(
            "--loop",
            help="The client's event loop: asyncio (the standard library's; the default, measured "
            "no slower here) or uvloop (needs uvloop installed, as every vLLM environment has it); "
            "auto picks uvloop when it can be imported. The manifest records the loop used "
            "(event_loop).",
        ),
    ] = DEFAULT_LOOP
    api_key_env: ApiKeyEnvOpt = None
    max_model_len: MaxModelLenOpt = None
    launch_record: Annotated[
        list[Path] | None,
        typer.Option(
            "--launch-record",
            help="An engine's launch record (its `vllm serve` command line, showing "
            "--no-enable-prefix-caching), copied into each run folder's launch-records/ and its "
            "SHA-256 into the manifest (repeat).",
        ),
    ] = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerViewOptions:
    """``run``'s view of the server side: the pages read around the run and the spans joined."""

    fleet: Annotated[
        Path | None,
        typer.Option(
            "--fleet",
            help="narwhal.fleet file: read each engine's /metrics just before the first offer "
            "and after the last stream ends (server.json; the summary compares them with the "
            "client's records per engine and for the fleet). Without it only --base's page "
            "is read.",
        ),
    ] = None
    engine_metrics: Annotated[
        list[str] | None,
        typer.Option(
            "--engine-metrics",
            metavar="URL",
            help="Another engine base URL whose /metrics to read around the run (repeat).",
        ),
    ] = None
    server_metrics: Annotated[
        bool,
        typer.Option(
            "--server-metrics/--no-server-metrics",
            help="Read the server's /metrics around the run. A page that cannot be read is "
            "recorded as missing and never fails the run.",
        ),
    ] = True
    otlp_receiver: Annotated[
        str | None,
        typer.Option(
            "--otlp-receiver",
            metavar="HOST:PORT",
            help="Receive the engines' per-request trace spans (OTLP/HTTP protobuf, POST "
            "/v1/traces or /v1/traces/<engine iid>) for the run's duration, in its own "
            "process, and join each to its record by request id: the server's queue, "
            "prefill, decode and TTFT per request. Start vLLM with --otlp-traces-endpoint "
            "http://HOST:PORT/v1/traces/<iid> and OTEL_EXPORTER_OTLP_TRACES_PROTOCOL="
            "http/protobuf.",
        ),
    ] = None
    otlp_wait: Annotated[
        float,
        typer.Option(
            "--otlp-wait",
            metavar="SECONDS",
            help="After the last stream, wait at most this long for the spans of every "
            "completed request (vLLM exports every 5 s by default).",
        ),
    ] = 15.0


def run_settings(
    trial: TrialOptions,
    client: ClientOptions,
    *,
    rate: float,
    requests: int,
    out: Path,
    invocation: Invocation,
) -> RunSettings:
    """``RunSettings`` from the shared options (``edge`` makes every trial's from these)."""
    return RunSettings(
        base_url=trial.base,
        workload_path=trial.workload,
        rate=rate,
        requests=requests,
        ttft_s=decimal_option(parse_seconds, trial.ttft, "--ttft"),
        tpot_s=decimal_option(parse_seconds, trial.tpot, "--tpot"),
        attainment=decimal_option(parse_fraction, trial.attainment, "--attainment"),
        out=out,
        max_in_flight=client.max_in_flight,
        max_lag_s=client.max_lag,
        request_timeout_s=client.request_timeout,
        drain_timeout_s=client.drain_timeout,
        keepalive_expiry_s=client.keepalive_expiry,
        drain_gauges=tuple(client.drain_gauge or ()),
        drain_preset=client.drain_preset,
        transport=client.transport,
        command=invocation.argv,
        launcher=invocation.launcher,
        api_key_env=client.api_key_env,
        max_model_len=client.max_model_len,
        launch_records=tuple(client.launch_record or ()),
        loop=client.loop,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class RunOptions:
    """``run``'s own options: where its records go and how its workload is timed."""

    out: Annotated[Path, typer.Option("--out", help="New private folder for the run's records.")]
    rate: Annotated[
        float | None,
        typer.Option(
            "--rate",
            help=f"Offered requests per second (at most {MAX_RATE:g}); the runbook's workload "
            "only.",
        ),
    ] = None
    requests: Annotated[
        int | None,
        typer.Option(
            "--requests",
            help=f"Offers, 1 to {MAX_REQUESTS} within a day; all count in the denominator. The "
            "runbook's workload only: a scheduled one holds its requests.",
        ),
    ] = None
    speedup: SpeedupOpt = None


def with_server_view(
    settings: RunSettings, server: ServerViewOptions, *, speedup: float | None
) -> RunSettings:
    """``settings`` with ``run``'s server view and a scheduled workload's ``--speedup``."""
    return dataclasses.replace(
        settings,
        speedup=speedup,
        fleet=server.fleet,
        engine_metrics=tuple(server.engine_metrics or ()),
        server_metrics=server.server_metrics,
        otlp_receiver=server.otlp_receiver,
        otlp_wait_s=server.otlp_wait,
    )
