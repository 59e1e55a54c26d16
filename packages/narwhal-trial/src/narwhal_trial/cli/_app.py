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

import sys
from importlib import metadata
from pathlib import Path
from typing import Annotated

import typer

from narwhal_trial._errors import TrialError
from narwhal_trial.cli._check_options import CheckOptions, ReconcileOptions
from narwhal_trial.cli._commands import (
    check_command,
    describe,
    predict_command,
    prepare_command,
    reconcile_command,
)
from narwhal_trial.cli._compare import CompareOptions, compare_shell
from narwhal_trial.cli._declare import declared
from narwhal_trial.cli._edge import EdgeOptions, EdgePredictOptions, edge
from narwhal_trial.cli._invocation import Invocation
from narwhal_trial.cli._predict_options import PredictOptions
from narwhal_trial.cli._prepare_options import PrepareOptions, ScheduleFlags
from narwhal_trial.cli._run_options import (
    ClientOptions,
    RunOptions,
    ServerViewOptions,
    TrialOptions,
    run_settings,
    with_server_view,
)
from narwhal_trial.run._replay import run_timing
from narwhal_trial.run._trial import run_trial


def _app() -> typer.Typer:
    app = typer.Typer(
        add_completion=False,
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
        help="The synthetic deployment trial: prepare, check, run, reconcile, predict, edge, "
        "compare.",
    )
    app.callback()(_root)
    app.command("prepare")(declared(prepare, options=PrepareOptions, schedule=ScheduleFlags))
    app.command("run")(
        declared(
            run,
            trial=TrialOptions,
            options=RunOptions,
            client=ClientOptions,
            server=ServerViewOptions,
        )
    )
    app.command("check")(declared(check, options=CheckOptions))
    app.command("reconcile")(declared(reconcile, options=ReconcileOptions))
    app.command("predict")(declared(predict, options=PredictOptions))
    app.command("compare")(declared(compare_shell, options=CompareOptions))
    app.command("edge")(
        declared(
            edge,
            trial=TrialOptions,
            search=EdgeOptions,
            predictor=EdgePredictOptions,
            client=ClientOptions,
        )
    )
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


def prepare(ctx: typer.Context, options: PrepareOptions, schedule: ScheduleFlags) -> None:
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
            base=options.base,
            input_tokens=options.input_tokens,
            output_tokens=options.output_tokens,
            seed=options.seed,
            out=options.out,
            model=options.model,
            api_key_env=options.api_key_env,
            max_model_len=options.max_model_len,
            tokenizer=options.tokenizer,
            schedule=schedule.options(),
        )
    print(f"wrote workload to {path}")


def run(
    ctx: typer.Context,
    trial: TrialOptions,
    options: RunOptions,
    client: ClientOptions,
    server: ServerViewOptions,
) -> None:
    """Drain, warm up, drain, then offer every request on its absolute schedule.

    The runbook's workload is offered at --rate, --requests times. A scheduled workload (prepare
    --trace or --arrivals) is replayed on its own due times, divided by --speedup (default 1:
    its real pace); each request is judged on its own output length.
    """
    inv: Invocation = ctx.obj
    with inv.errors():
        timing = run_timing(
            trial.workload, rate=options.rate, requests=options.requests, speedup=options.speedup
        )
    settings = run_settings(
        trial, client, rate=timing.rate, requests=timing.requests, out=options.out, invocation=inv
    )
    settings = with_server_view(settings, server, speedup=timing.speedup)
    with inv.errors():
        summary = run_trial(settings)
    print(describe(summary, settings))
    if summary.error:
        print(f"{inv.prog}: error: {summary.error}", file=sys.stderr)
    raise typer.Exit(summary.exit_code)


def check(ctx: typer.Context, options: CheckOptions) -> None:
    """Before the trial: context limits, profile domain, prefix caching off and, with --probe,
    each engine's speed against its profile. Exit 0 when every check passes, 2 when one fails, 1
    when an input cannot be used."""
    inv: Invocation = ctx.obj
    with inv.errors():
        code, text = check_command(
            workload=options.workload,
            fleet=options.fleet,
            profiles=options.profiles,
            launch_records=options.launch_record or [],
            engines=options.engine or [],
            api_key_env=options.api_key_env,
            max_model_len=options.max_model_len,
            probe=options.probe,
        )
    print(text)
    raise typer.Exit(code)


def reconcile(ctx: typer.Context, options: ReconcileOptions) -> None:
    """Match every client record to the router journal by request id. Exit 0 when all reconcile,
    2 when one does not, 1 when a file cannot be read or a request that is not the trial's
    overlaps its window (the router was not reserved)."""
    inv: Invocation = ctx.obj
    with inv.errors():
        code, text, error = reconcile_command(
            requests=options.requests, journal=options.journal, as_json=options.json_out
        )
    print(text)
    if error is not None:
        print(f"{inv.prog}: error: {error}", file=sys.stderr)
    raise typer.Exit(code)


def predict(ctx: typer.Context, options: PredictOptions) -> None:
    """Predict the trial from the profiles (no engine is contacted; only --frontend is read).
    With --workload, a scheduled workload is predicted on its own due times and lengths divided by
    --speedup (default 1; --find-max-rate searches the highest speedup). Exit 0 when the
    prediction passes (pass probability at least 0.5), 2 when it misses the target, 1 for bad
    input or a trial outside the profiled domain."""
    inv: Invocation = ctx.obj
    with inv.errors():
        shape, facts = options.shape()
        code, text = predict_command(
            options.request(shape, facts),
            as_json=options.json_out,
            out=options.out,
            api_key_env=options.api_key_env,
        )
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
