"""The ``narwhal-trial`` command (and ``tools/measurement/load_trial.py``): a thin typer shell.

Exit codes follow the runbook: 0 pass with a valid schedule; 2 attainment or scheduling missed, with
``summary.json`` written; 1 a blocking error (usage errors and invalid option values, before
anything is created, and an ``--out`` that already holds results, too); 130 interrupted. The other
commands keep 2 for their own judged outcome alone: ``check`` a failed check, ``reconcile`` a
record that does not reconcile, ``predict`` a prediction that misses the target. ``edge`` (the
measured capacity search, ``_edge``) exits 0 when its bracket is within the tolerance, 2 when
the budget ran out first, 1 for a blocking error, 130 interrupted.
"""

from __future__ import annotations

import dataclasses
import sys
from importlib import metadata
from pathlib import Path
from typing import Annotated

import typer

from narwhal_trial._errors import TrialError
from narwhal_trial._limits import DEFAULT_MAX_IN_FLIGHT, MAX_RATE, MAX_REQUESTS
from narwhal_trial._stats import parse_fraction, parse_seconds
from narwhal_trial.cli._commands import (
    check_command,
    describe,
    predict_command,
    prepare_command,
    reconcile_command,
)
from narwhal_trial.cli._edge import edge
from narwhal_trial.cli._invocation import Invocation
from narwhal_trial.cli._predict_workload import predict_shape
from narwhal_trial.cli._prepare_options import (
    ArrivalsOpt,
    BlockTokensOpt,
    BurstinessOpt,
    ClipOpt,
    DurationOpt,
    InputLengthsOpt,
    LimitOpt,
    OutputLengthsOpt,
    RateOpt,
    RequestsOpt,
    SpeedupOpt,
    StartOpt,
    TraceFormatOpt,
    TraceOpt,
)
from narwhal_trial.cli._run_options import (
    DRAIN_TIMEOUT_DEFAULT_S,
    KEEPALIVE_EXPIRY_DEFAULT_S,
    MAX_IN_FLIGHT_DEFAULT,
    MAX_LAG_DEFAULT_S,
    REQUEST_TIMEOUT_DEFAULT_S,
    ApiKeyEnvOpt,
    AttainmentOpt,
    BaseOpt,
    ClientOptions,
    DrainGaugeOpt,
    DrainPresetOpt,
    DrainTimeoutOpt,
    KeepaliveExpiryOpt,
    LaunchRecordOpt,
    LoopOpt,
    MaxInFlightOpt,
    MaxLagOpt,
    MaxModelLenOpt,
    RequestTimeoutOpt,
    TpotOpt,
    TransportOpt,
    TtftOpt,
    WorkloadOpt,
    decimal_option,
    run_settings,
)
from narwhal_trial.predictor._model import TrialTarget
from narwhal_trial.predictor._predict import DEFAULT_REPLICATIONS, MAX_REPLICATIONS, PredictRequest
from narwhal_trial.predictor._vtime import DEFAULT_MAX_NUM_BATCHED_TOKENS
from narwhal_trial.run._event_loop import DEFAULT_LOOP
from narwhal_trial.run._replay import run_timing
from narwhal_trial.run._trial import run_trial
from narwhal_trial.workload._schedule_options import ScheduleOptions


def _app() -> typer.Typer:
    app = typer.Typer(
        add_completion=False,
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
        help="The synthetic deployment trial: prepare, check, run, reconcile, predict, edge.",
    )
    app.callback()(_root)
    app.command("prepare")(prepare)
    app.command("run")(run)
    app.command("check")(check)
    app.command("reconcile")(reconcile)
    app.command("predict")(predict)
    app.command("edge")(edge)
    return app


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"narwhal-trial (narwhal-trial) {metadata.version('narwhal-trial')}")
        raise typer.Exit(0)


def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            is_eager=True,
            callback=_print_version,
            help="Print the installed narwhal-trial version.",
        ),
    ] = False,
) -> None:
    """The options before the command."""


def prepare(
    ctx: typer.Context,
    base: BaseOpt,
    seed: Annotated[
        int, typer.Option("--seed", min=0, help="Sampler seed; request n uses seed + n.")
    ],
    out: Annotated[Path, typer.Option("--out", help="New folder for workload.json.")],
    input_tokens: Annotated[
        int | None,
        typer.Option(
            "--input-tokens", min=1, help="Prompt tokens of every request (the runbook: 8192)."
        ),
    ] = None,
    output_tokens: Annotated[
        int | None,
        typer.Option(
            "--output-tokens", min=1, help="Output tokens of every request (the runbook: 128)."
        ),
    ] = None,
    model: Annotated[
        str | None, typer.Option("--model", help="Served model (default: the only one).")
    ] = None,
    api_key_env: ApiKeyEnvOpt = None,
    max_model_len: MaxModelLenOpt = None,
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
    ] = None,
    trace: TraceOpt = None,
    trace_format: TraceFormatOpt = None,
    start: StartOpt = None,
    duration: DurationOpt = None,
    limit: LimitOpt = None,
    block_tokens: BlockTokensOpt = None,
    clip_to_model: ClipOpt = False,
    arrivals: ArrivalsOpt = None,
    burstiness: BurstinessOpt = None,
    rate: RateOpt = None,
    requests: RequestsOpt = None,
    input_lengths: InputLengthsOpt = None,
    output_lengths: OutputLengthsOpt = None,
) -> None:
    """Query the served model, complete the seed prompt, write OUT/workload.json.

    The runbook's workload: --input-tokens 8192 --output-tokens 128, run at a --rate. A scheduled
    workload instead holds each request's due time and lengths: a production trace's window
    (--trace FILE, with --start/--duration/--limit) or synthetic draws (--arrivals poisson --rate
    R --requests N, lengths fixed or --input-lengths/--output-lengths SPEC); run replays it with
    --speedup.

    Best pointed at an engine: the workload then runs against any router serving the same model.
    Through a frontend whose workers serve no HTTP (NVIDIA Dynamo), give --tokenizer and, when
    its metrics publish no context length, --max-model-len.
    """
    inv: Invocation = ctx.obj
    with inv.errors():
        path = prepare_command(
            base=base,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            seed=seed,
            out=out,
            model=model,
            api_key_env=api_key_env,
            max_model_len=max_model_len,
            tokenizer=tokenizer,
            schedule=ScheduleOptions(
                trace=trace,
                trace_format=trace_format,
                start_s=start,
                duration_s=duration,
                limit=limit,
                block_tokens=block_tokens,
                clip_to_model=clip_to_model,
                arrivals=arrivals,
                burstiness=burstiness,
                rate=rate,
                requests=requests,
                input_lengths=input_lengths,
                output_lengths=output_lengths,
            ),
        )
    print(f"wrote workload to {path}")


def run(
    ctx: typer.Context,
    base: BaseOpt,
    workload: WorkloadOpt,
    ttft: TtftOpt,
    tpot: TpotOpt,
    attainment: AttainmentOpt,
    out: Annotated[Path, typer.Option("--out", help="New private folder for the run's records.")],
    rate: Annotated[
        float | None,
        typer.Option(
            "--rate",
            help=f"Offered requests per second (at most {MAX_RATE:g}); the runbook's workload "
            "only.",
        ),
    ] = None,
    requests: Annotated[
        int | None,
        typer.Option(
            "--requests",
            help=f"Offers, 1 to {MAX_REQUESTS} within a day; all count in the denominator. The "
            "runbook's workload only: a scheduled one holds its requests.",
        ),
    ] = None,
    speedup: SpeedupOpt = None,
    max_in_flight: MaxInFlightOpt = MAX_IN_FLIGHT_DEFAULT,
    max_lag: MaxLagOpt = MAX_LAG_DEFAULT_S,
    request_timeout: RequestTimeoutOpt = REQUEST_TIMEOUT_DEFAULT_S,
    drain_timeout: DrainTimeoutOpt = DRAIN_TIMEOUT_DEFAULT_S,
    keepalive_expiry: KeepaliveExpiryOpt = KEEPALIVE_EXPIRY_DEFAULT_S,
    drain_preset: DrainPresetOpt = None,
    drain_gauge: DrainGaugeOpt = None,
    transport: TransportOpt = "auto",
    loop: LoopOpt = DEFAULT_LOOP,
    api_key_env: ApiKeyEnvOpt = None,
    max_model_len: MaxModelLenOpt = None,
    launch_record: LaunchRecordOpt = None,
    fleet: Annotated[
        Path | None,
        typer.Option(
            "--fleet",
            help="narwhal.fleet file: read each engine's /metrics just before the first offer "
            "and after the last stream ends (server.json; the summary compares them with the "
            "client's records per engine and for the fleet). Without it only --base's page "
            "is read.",
        ),
    ] = None,
    engine_metrics: Annotated[
        list[str] | None,
        typer.Option(
            "--engine-metrics",
            metavar="URL",
            help="Another engine base URL whose /metrics to read around the run (repeat).",
        ),
    ] = None,
    server_metrics: Annotated[
        bool,
        typer.Option(
            "--server-metrics/--no-server-metrics",
            help="Read the server's /metrics around the run. A page that cannot be read is "
            "recorded as missing and never fails the run.",
        ),
    ] = True,
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
    ] = None,
    otlp_wait: Annotated[
        float,
        typer.Option(
            "--otlp-wait",
            metavar="SECONDS",
            help="After the last stream, wait at most this long for the spans of every "
            "completed request (vLLM exports every 5 s by default).",
        ),
    ] = 15.0,
) -> None:
    """Drain, warm up, drain, then offer every request on its absolute schedule.

    The runbook's workload is offered at --rate, --requests times. A scheduled workload (prepare
    --trace or --arrivals) is replayed on its own due times, divided by --speedup (default 1:
    its real pace); each request is judged on its own output length.
    """
    inv: Invocation = ctx.obj
    with inv.errors():
        timing = run_timing(workload, rate=rate, requests=requests, speedup=speedup)
    settings = run_settings(
        base=base,
        workload=workload,
        rate=timing.rate,
        requests=timing.requests,
        bounds=(ttft, tpot, attainment),
        out=out,
        client=ClientOptions(
            max_in_flight=max_in_flight,
            max_lag=max_lag,
            request_timeout=request_timeout,
            drain_timeout=drain_timeout,
            keepalive_expiry=keepalive_expiry,
            drain_preset=drain_preset,
            drain_gauge=drain_gauge,
            transport=transport,
            api_key_env=api_key_env,
            max_model_len=max_model_len,
            launch_record=launch_record,
            loop=loop,
        ),
        command=inv.argv,
        launcher=inv.launcher,
    )
    settings = dataclasses.replace(
        settings,
        speedup=timing.speedup,
        fleet=fleet,
        engine_metrics=tuple(engine_metrics or ()),
        server_metrics=server_metrics,
        otlp_receiver=otlp_receiver,
        otlp_wait_s=otlp_wait,
    )
    with inv.errors():
        summary = run_trial(settings)
    print(describe(summary, settings))
    if summary.error:
        print(f"{inv.prog}: error: {summary.error}", file=sys.stderr)
    raise typer.Exit(summary.exit_code)


def check(
    ctx: typer.Context,
    workload: Annotated[Path, typer.Option("--workload", help="workload.json from prepare.")],
    fleet: Annotated[Path, typer.Option("--fleet", help="narwhal.fleet file of the targets.")],
    profiles: Annotated[Path, typer.Option("--profiles", help="Accepted profile store.")],
    launch_record: Annotated[
        list[Path] | None,
        typer.Option("--launch-record", help="File holding a `vllm serve` command (repeat)."),
    ] = None,
    engine: Annotated[
        list[str] | None,
        typer.Option("--engine", help="Check only this engine iid (repeat; default: all)."),
    ] = None,
    api_key_env: ApiKeyEnvOpt = None,
    max_model_len: MaxModelLenOpt = None,
) -> None:
    """Before the trial: context limits, profile domain, prefix caching off. Exit 0 when every
    check passes, 2 when one fails, 1 when an input cannot be used."""
    inv: Invocation = ctx.obj
    with inv.errors():
        code, text = check_command(
            workload=workload,
            fleet=fleet,
            profiles=profiles,
            launch_records=launch_record or [],
            engines=engine or [],
            api_key_env=api_key_env,
            max_model_len=max_model_len,
        )
    print(text)
    raise typer.Exit(code)


def reconcile(
    ctx: typer.Context,
    requests: Annotated[Path, typer.Option("--requests", help="A run's requests.jsonl.")],
    journal: Annotated[Path, typer.Option("--journal", help="The router's journal (JSON lines).")],
    json_out: Annotated[
        bool, typer.Option("--json", help="Print the report as one JSON object.")
    ] = False,
) -> None:
    """Match every client record to the router journal by request id. Exit 0 when all reconcile,
    2 when one does not, 1 when a file cannot be read or a request that is not the trial's
    overlaps its window (the router was not reserved)."""
    inv: Invocation = ctx.obj
    with inv.errors():
        code, text, error = reconcile_command(requests=requests, journal=journal, as_json=json_out)
    print(text)
    if error is not None:
        print(f"{inv.prog}: error: {error}", file=sys.stderr)
    raise typer.Exit(code)


def predict(
    ctx: typer.Context,
    fleet: Annotated[Path, typer.Option("--fleet", help="narwhal.fleet file of the fleet.")],
    profiles: Annotated[Path, typer.Option("--profiles", help="Accepted profile store.")],
    ttft: Annotated[str, typer.Option("--ttft", help="TTFT bound, seconds.")],
    tpot: Annotated[str, typer.Option("--tpot", help="TPOT bound, seconds.")],
    attainment: Annotated[str, typer.Option("--attainment", help="Required good fraction.")],
    input_tokens: Annotated[
        int | None,
        typer.Option("--input-tokens", min=1, help="Prompt tokens (or --workload)."),
    ] = None,
    output_tokens: Annotated[
        int | None,
        typer.Option("--output-tokens", min=1, help="Output tokens (or --workload)."),
    ] = None,
    requests: Annotated[
        int | None,
        typer.Option(
            "--requests", min=1, help="Offers of the trial (a scheduled workload holds its own)."
        ),
    ] = None,
    rate: Annotated[
        float | None, typer.Option("--rate", help="Offered requests per second to predict.")
    ] = None,
    find_max_rate: Annotated[
        bool,
        typer.Option(
            "--find-max-rate",
            help="Also search the highest rate predicted to pass (a scheduled workload: the "
            "highest --speedup).",
        ),
    ] = False,
    workload: Annotated[
        Path | None,
        typer.Option(
            "--workload",
            help="workload.json from prepare: the runbook's gives --input-tokens and "
            "--output-tokens; a scheduled one (prepare --trace or --arrivals) is predicted on its "
            "own due times and lengths, divided by --speedup, instead of --requests at --rate.",
        ),
    ] = None,
    speedup: SpeedupOpt = None,
    limits: Annotated[
        Path | None,
        typer.Option(
            "--limits",
            help="narwhal.limits file: max_num_seqs, max_num_batched_tokens, "
            "enable_chunked_prefill per engine (over the profiles' values).",
        ),
    ] = None,
    kv_transfer: Annotated[
        float,
        typer.Option(
            "--kv-transfer-s-per-token",
            min=0.0,
            help="Seconds per prompt token to move a split request's KV from the prefill to the "
            "decode engine (no profile measures it).",
        ),
    ] = 0.0,
    max_num_batched_tokens: Annotated[
        int | None,
        typer.Option(
            "--max-num-batched-tokens",
            min=1,
            help="Every engine's per-step token budget, over what the profiles recorded (read "
            "from the engine or given in a limits file when it was measured; else "
            f"{DEFAULT_MAX_NUM_BATCHED_TOKENS}). The prediction says which it used.",
        ),
    ] = None,
    max_in_flight: Annotated[
        int,
        typer.Option(
            "--max-in-flight", min=1, help="The trial's in-flight cap (as run --max-in-flight)."
        ),
    ] = DEFAULT_MAX_IN_FLIGHT,
    replications: Annotated[
        int,
        typer.Option(
            "--replications",
            min=1,
            max=MAX_REPLICATIONS,
            help="Monte Carlo replications of the fleet, each with latencies drawn from the "
            "profile's own raw timings (the sidecar): the median attainment, its 5-95% range and "
            "the probability that the trial passes; with --find-max-rate, the rates where that "
            "probability crosses 0.9, 0.5 and 0.1. 1: the fits alone, deterministic (the "
            "predictions of format_version 1).",
        ),
    ] = DEFAULT_REPLICATIONS,
    seed: Annotated[
        int,
        typer.Option("--seed", min=0, help="Seed of the replications (same seed, same result)."),
    ] = 0,
    calibrate: Annotated[
        Path | None,
        typer.Option(
            "--calibrate",
            help="A run folder of a trial of this fleet: compare its median TTFT and TPOT with "
            "the prediction at its own rate and report the correction (one factor on every "
            "engine's prefill fit, one on its decode fit) that makes them agree. Reported only, "
            "unless --apply-calibration.",
        ),
    ] = None,
    apply_calibration: Annotated[
        bool,
        typer.Option(
            "--apply-calibration",
            help="Predict with the --calibrate correction applied (the prediction says so).",
        ),
    ] = False,
    frontend: Annotated[
        str | None,
        typer.Option(
            "--frontend",
            metavar="URL",
            help="A frontend that publishes its workers' scheduler settings (NVIDIA Dynamo's "
            "dynamo_frontend_model_max_num_seqs and _max_num_batched_tokens): read once and used "
            "over the profiles' (under --limits); a difference from a profile is warned about.",
        ),
    ] = None,
    api_key_env: ApiKeyEnvOpt = None,
    json_out: Annotated[
        bool, typer.Option("--json", help="Print the JSON document instead of the text.")
    ] = False,
    out: Annotated[
        Path | None, typer.Option("--out", help="Also write the JSON document to this new file.")
    ] = None,
) -> None:
    """Predict the trial from the profiles (no engine is contacted; only --frontend is read).
    With --workload, a scheduled workload is predicted on its own due times and lengths divided by
    --speedup (default 1; --find-max-rate searches the highest speedup). Exit 0 when the
    prediction passes (pass probability at least 0.5), 2 when it misses the target, 1 for bad
    input or a trial outside the profiled domain."""
    inv: Invocation = ctx.obj
    with inv.errors():
        shape, facts = predict_shape(
            workload,
            requests=requests,
            rate=rate,
            speedup=speedup,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            kv_transfer_s_per_token=kv_transfer,
            max_num_batched_tokens=max_num_batched_tokens,
            max_in_flight=max_in_flight,
        )
        req = PredictRequest(
            fleet=fleet,
            profiles=profiles,
            limits=limits,
            shape=shape,
            target=TrialTarget(
                decimal_option(parse_seconds, ttft, "--ttft"),
                decimal_option(parse_seconds, tpot, "--tpot"),
                decimal_option(parse_fraction, attainment, "--attainment"),
            ),
            rate=rate,
            find_max_rate=find_max_rate,
            replications=replications,
            seed=seed,
            calibrate=calibrate,
            apply_calibration=apply_calibration,
            frontend=frontend,
            workload=facts,
            speedup=speedup,
        )
        code, text = predict_command(req, as_json=json_out, out=out, api_key_env=api_key_env)
    print(text)
    raise typer.Exit(code)


def main(argv: list[str] | None = None, *, launcher: Path | None = None) -> None:
    """Entry point of ``narwhal-trial``; the launcher passes its own path for the helper digest."""
    args = list(sys.argv[1:] if argv is None else argv)
    prog = launcher.name if launcher is not None else Path(sys.argv[0]).name
    if prog in ("", "__main__.py"):  # python -m narwhal_trial
        prog = "narwhal-trial"
    command = (sys.executable, sys.argv[0], *args) if argv is None else ("narwhal-trial", *args)
    inv = Invocation(prog=prog, argv=command, launcher=launcher)
    sys.exit(_invoke(args or ["--help"], prog, inv))


def _invoke(args: list[str], prog: str, inv: Invocation) -> int:
    """Run the typer app; a usage error typer finds itself (unknown option, missing value, bad
    type, a value out of range) is one ``PROG: error: ...`` line and exit 1, a blocking error as
    the runbook's table has it (2 is a judged run), never click's usage block."""
    command = typer.main.get_command(_app())
    try:
        code = command.main(args=args, prog_name=prog, obj=inv, standalone_mode=False)
    except typer.TyperException as exc:
        message = " ".join(exc.format_message().split())
        print(f"{prog}: error: {message}", file=sys.stderr)
        return TrialError.exit_code
    except typer.Abort:
        return 130
    return code if isinstance(code, int) else 0
