"""The ``edge`` subcommand: its options (the trial's and the client's as ``run``'s, the search's
and the predictor's), declared once as dataclass fields (``_declare``), and a thin shell over
``edge._command.edge_command``; ``_app`` registers it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from narwhal_trial.cli._invocation import Invocation
from narwhal_trial.cli._run_options import ClientOptions, TrialOptions, run_settings
from narwhal_trial.edge._command import edge_command
from narwhal_trial.edge._settings import BandSettings, EdgeSettings, predict_options
from narwhal_trial.run._replay import RunTiming, run_timing

_PREDICT = "With --fleet and --profiles: "


@dataclass(frozen=True, slots=True, kw_only=True)
class EdgeOptions:
    """The search's own options: where it writes, each trial's size, where it starts, when it
    stops."""

    out: Annotated[
        Path,
        typer.Option(
            "--out",
            help="New private folder: edge.json and one run folder per trial "
            "(trial-01-rate-R/, or trial-01-speedup-X/ for a scheduled workload, ...).",
        ),
    ]
    requests: Annotated[
        int | None,
        typer.Option(
            "--requests",
            help="Offers per trial; all count in the denominator. The runbook's workload only: "
            "a scheduled one holds its requests.",
        ),
    ] = None
    start_rate: Annotated[
        float | None,
        typer.Option(
            "--start-rate",
            help="Without --profiles (or when the band holds no passing rate): the first rate "
            "(default 1); doubled after a pass, halved after a miss until both ends exist.",
        ),
    ] = None
    start_speedup: Annotated[
        float | None,
        typer.Option(
            "--start-speedup",
            metavar="X",
            help="A scheduled workload (prepare --trace or --arrivals): the search varies its "
            "--speedup instead of a rate, starting here (default 1).",
        ),
    ] = None
    tolerance: Annotated[
        float,
        typer.Option(
            "--tolerance",
            help="Stop when lowest miss / highest pass - 1 is at most this (0.01 to 1).",
        ),
    ] = 0.05
    max_trials: Annotated[
        int,
        typer.Option(
            "--max-trials", help="The budget: every trial run counts, repeats included (from 2)."
        ),
    ] = 8
    max_repeats: Annotated[
        int,
        typer.Option(
            "--max-repeats",
            help="Repeats of a rate whose trial had an invalid schedule or a blocking error "
            "(never read as a miss); one that stays so ends the search (exit 1).",
        ),
    ] = 2

    def timing(self, workload: Path) -> RunTiming:
        """The first trial's timing: its rate (or a scheduled workload's speedup) and size."""
        return run_timing(
            workload,
            rate=self.start_rate,
            requests=self.requests,
            speedup=self.start_speedup,
            rate_flag="--start-rate",
            speedup_flag="--start-speedup",
            default_rate=1.0,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class EdgePredictOptions:
    """Where the search starts from the predicted band: the fleet, its profiles and the
    predictor's settings."""

    fleet: Annotated[
        Path | None,
        typer.Option("--fleet", help="narwhal.fleet file: start from the predicted band."),
    ] = None
    profiles: Annotated[
        Path | None, typer.Option("--profiles", help="Accepted profile store (with --fleet).")
    ] = None
    limits: Annotated[
        Path | None, typer.Option("--limits", help=_PREDICT + "narwhal.limits file.")
    ] = None
    kv_transfer: Annotated[
        float | None,
        typer.Option(
            "--kv-transfer-s-per-token",
            help=_PREDICT + "seconds per prompt token to move a split request's KV (default 0).",
        ),
    ] = None
    max_num_batched_tokens: Annotated[
        int | None,
        typer.Option(
            "--max-num-batched-tokens",
            help=_PREDICT
            + "every engine's per-step token budget (default: each engine's, from its "
            "profile, else 8192).",
        ),
    ] = None
    replications: Annotated[
        int | None,
        typer.Option(
            "--replications",
            help=_PREDICT
            + "the band's Monte Carlo replications per rate (default 100; 1: the fits "
            "alone, one rate for all three crossings).",
        ),
    ] = None
    seed: Annotated[
        int | None, typer.Option("--seed", help=_PREDICT + "the band's random seed.")
    ] = None

    def settings(self) -> BandSettings | None:
        """The predictor's settings (None without ``--fleet`` and ``--profiles``)."""
        return predict_options(
            self.fleet,
            self.profiles,
            limits=self.limits,
            kv_transfer_s_per_token=self.kv_transfer,
            max_num_batched_tokens=self.max_num_batched_tokens,
            replications=self.replications,
            seed=self.seed,
        )


def edge(
    ctx: typer.Context,
    trial: TrialOptions,
    search: EdgeOptions,
    predictor: EdgePredictOptions,
    client: ClientOptions,
) -> None:
    """Find the measured edge with few trials: start from predict's band (--fleet, --profiles)
    or double from --start-rate, then bisect on rate, each trial a normal run (drain, warm-up,
    drain, offers). A scheduled workload (prepare --trace or --arrivals) is searched on its
    --speedup instead, from --start-speedup. Exit 0 when the bracket between the highest pass
    and the lowest miss is within --tolerance; 2 when the budget (or the rate bounds) ran out
    first; 1 for bad input, a blocking error, or a rate whose schedule stayed invalid after its
    repeats; 130 interrupted.
    """
    inv: Invocation = ctx.obj
    with inv.errors():
        timing = search.timing(trial.workload)
        run = run_settings(
            trial,
            client,
            rate=timing.rate,
            requests=timing.requests,
            out=search.out,
            invocation=inv,
        )
        settings = EdgeSettings(
            run=run,
            out=search.out,
            tolerance=search.tolerance,
            max_trials=search.max_trials,
            max_repeats=search.max_repeats,
            start_rate=timing.rate if timing.speedup is None else timing.speedup,
            schedule_rate=timing.base_rate,
            schedule_span_s=timing.span_s,
            predict=predictor.settings(),
        )
        code = edge_command(settings, emit=lambda line: typer.echo(line))
    raise typer.Exit(code)
