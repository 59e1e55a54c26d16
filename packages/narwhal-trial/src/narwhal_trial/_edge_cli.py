"""The ``edge`` subcommand's options: ``run``'s, the search's and the predictor's (a thin shell over
``_edge_command.edge_command``; ``cli`` registers it)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import typer

from narwhal_engine_client import DEFAULT_KEEPALIVE_EXPIRY_S
from narwhal_trial._commands import fail
from narwhal_trial._drain import DEFAULT_PRESET, DrainPreset
from narwhal_trial._edge_command import edge_command
from narwhal_trial._edge_settings import EdgeSettings, predict_options
from narwhal_trial._errors import TrialError
from narwhal_trial._schedule import DEFAULT_MAX_IN_FLIGHT
from narwhal_trial._settings import MAX_IN_FLIGHT, RunSettings
from narwhal_trial._stats import parse_fraction, parse_seconds
from narwhal_trial.cli import (
    _PRESET_HELP,
    ApiKeyEnvOpt,
    BaseOpt,
    MaxModelLenOpt,
    _decimal,
    _Invocation,
)

_PREDICT = "With --fleet and --profiles: "


def edge(
    ctx: typer.Context,
    base: BaseOpt,
    workload: Annotated[Path, typer.Option("--workload", help="workload.json from prepare.")],
    requests: Annotated[
        int, typer.Option("--requests", help="Offers per trial; all count in the denominator.")
    ],
    ttft: Annotated[str, typer.Option("--ttft", help="TTFT bound, seconds.")],
    tpot: Annotated[str, typer.Option("--tpot", help="TPOT bound, seconds.")],
    attainment: Annotated[str, typer.Option("--attainment", help="Required good fraction.")],
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            help="New private folder: edge.json and one run folder per trial "
            "(trial-01-rate-R/, ...).",
        ),
    ],
    start_rate: Annotated[
        float,
        typer.Option(
            "--start-rate",
            help="Without --profiles (or when the band holds no passing rate): the first rate; "
            "doubled after a pass, halved after a miss until both ends exist.",
        ),
    ] = 1.0,
    tolerance: Annotated[
        float,
        typer.Option(
            "--tolerance",
            help="Stop when lowest miss / highest pass - 1 is at most this (0.01 to 1).",
        ),
    ] = 0.05,
    max_trials: Annotated[
        int,
        typer.Option(
            "--max-trials", help="The budget: every trial run counts, repeats included (from 2)."
        ),
    ] = 8,
    max_repeats: Annotated[
        int,
        typer.Option(
            "--max-repeats",
            help="Repeats of a rate whose trial had an invalid schedule or a blocking error "
            "(never read as a miss); one that stays so ends the search (exit 1).",
        ),
    ] = 2,
    fleet: Annotated[
        Path | None,
        typer.Option("--fleet", help="narwhal.fleet file: start from the predicted band."),
    ] = None,
    profiles: Annotated[
        Path | None, typer.Option("--profiles", help="Accepted profile store (with --fleet).")
    ] = None,
    limits: Annotated[
        Path | None, typer.Option("--limits", help=_PREDICT + "narwhal.limits file.")
    ] = None,
    kv_transfer: Annotated[
        float | None,
        typer.Option(
            "--kv-transfer-s-per-token",
            help=_PREDICT + "seconds per prompt token to move a split request's KV (default 0).",
        ),
    ] = None,
    max_num_batched_tokens: Annotated[
        int | None,
        typer.Option(
            "--max-num-batched-tokens",
            help=_PREDICT + "the engines' per-step token budget (default 8192).",
        ),
    ] = None,
    replications: Annotated[
        int | None,
        typer.Option(
            "--replications",
            help=_PREDICT
            + "the band's Monte Carlo replications per rate (default 100; 1: the fits "
            "alone, one rate for all three crossings).",
        ),
    ] = None,
    seed: Annotated[
        int | None, typer.Option("--seed", help=_PREDICT + "the band's random seed.")
    ] = None,
    max_in_flight: Annotated[
        int,
        typer.Option(
            "--max-in-flight",
            help=f"As run's: offers due while this many are in flight are misses (1 to "
            f"{MAX_IN_FLIGHT}).",
        ),
    ] = DEFAULT_MAX_IN_FLIGHT,
    max_lag: Annotated[
        float,
        typer.Option("--max-lag", help="Seconds after its due time an offer may still be sent."),
    ] = 0.050,
    request_timeout: Annotated[
        float,
        typer.Option("--request-timeout", help="Seconds before a request counts as a timeout."),
    ] = 300.0,
    drain_timeout: Annotated[
        float, typer.Option("--drain-timeout", help="Seconds to wait for the fleet to drain.")
    ] = 600.0,
    keepalive_expiry: Annotated[
        float,
        typer.Option(
            "--keepalive-expiry",
            metavar="SECONDS",
            help="As run's: an idle kept-alive connection older than this is never reused.",
        ),
    ] = DEFAULT_KEEPALIVE_EXPIRY_S,
    drain_preset: Annotated[
        DrainPreset | None,
        typer.Option(
            "--drain-preset",
            help=f"The drain gauges of what stands at --base (default {DEFAULT_PRESET}): "
            f"{_PRESET_HELP}.",
        ),
    ] = None,
    drain_gauge: Annotated[
        list[str] | None,
        typer.Option(
            "--drain-gauge", help="Gauge that must read 0 (repeat; instead of --drain-preset)."
        ),
    ] = None,
    transport: Annotated[
        Literal["auto", "raw", "httpx"],
        typer.Option("--transport", help="As run's: raw, httpx, or auto (raw for http://)."),
    ] = "auto",
    api_key_env: ApiKeyEnvOpt = None,
    max_model_len: MaxModelLenOpt = None,
    launch_record: Annotated[
        list[Path] | None,
        typer.Option(
            "--launch-record",
            help="An engine's launch record, copied into every trial's run folder (repeat).",
        ),
    ] = None,
) -> None:
    """Find the measured edge with few trials: start from predict's band (--fleet, --profiles)
    or double from --start-rate, then bisect on rate, each trial a normal run (drain, warm-up,
    drain, offers). Exit 0 when the bracket between the highest pass and the lowest miss is
    within --tolerance; 2 when the budget (or the rate bounds) ran out first; 1 for bad input,
    a blocking error, or a rate whose schedule stayed invalid after its repeats; 130 interrupted.
    """
    inv: _Invocation = ctx.obj
    try:
        run = RunSettings(
            base_url=base,
            workload_path=workload,
            rate=start_rate,
            requests=requests,
            ttft_s=_decimal(parse_seconds, ttft, "--ttft"),
            tpot_s=_decimal(parse_seconds, tpot, "--tpot"),
            attainment=_decimal(parse_fraction, attainment, "--attainment"),
            out=out,
            max_in_flight=max_in_flight,
            max_lag_s=max_lag,
            request_timeout_s=request_timeout,
            drain_timeout_s=drain_timeout,
            keepalive_expiry_s=keepalive_expiry,
            drain_gauges=tuple(drain_gauge or ()),
            drain_preset=drain_preset,
            transport=transport,
            command=inv.argv,
            launcher=inv.launcher,
            api_key_env=api_key_env,
            max_model_len=max_model_len,
            launch_records=tuple(launch_record or ()),
        )
        settings = EdgeSettings(
            run=run,
            out=out,
            tolerance=tolerance,
            max_trials=max_trials,
            max_repeats=max_repeats,
            start_rate=start_rate,
            predict=predict_options(
                fleet,
                profiles,
                limits=limits,
                kv_transfer_s_per_token=kv_transfer,
                max_num_batched_tokens=max_num_batched_tokens,
                replications=replications,
                seed=seed,
            ),
        )
        code = edge_command(settings, emit=lambda line: typer.echo(line))
    except TrialError as exc:
        raise typer.Exit(fail(inv.prog, exc)) from exc
    except KeyboardInterrupt:  # edge.json, once written, keeps what was found
        raise typer.Exit(130) from None
    raise typer.Exit(code)
