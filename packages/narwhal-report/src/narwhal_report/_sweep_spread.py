"""Beside the sweep's plot: the Monte Carlo prediction at each measured trial rate and the width
each source of spread gives alone (``RatePrediction.spread_sources``).

The model is the one ``load_trial.py predict`` builds from the store; when a freshness probe of
that store is among the inputs (the newest, if several), each engine's speed is drawn from it
exactly as ``predict --calibrate PROBE`` does (``probe_model``), else from the profile sweep's
own history.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from narwhal_report import _svg
from narwhal_report._html import Markup, badge, join, pct, table, tag
from narwhal_report._sweep_model import StoreModel
from narwhal_store import ProbeDocument
from narwhal_trial import (
    FleetModel,
    OutsideDomainError,
    ProbeTrust,
    TrialRun,
    predict_rate,
    probe_model,
)

REPLICATIONS = 50
"""Monte Carlo replications per measured rate by default: the pass probability to 2 %."""
MAX_REPLICATIONS = 10_000
SEED = 0


@dataclass(frozen=True, slots=True)
class SpreadRow:
    """One measured rate: the trial's outcome and the Monte Carlo prediction there (None, and
    ``note`` says why, where there is no Monte Carlo range)."""

    rate: float
    run: str
    good: int
    requests: int
    passed: bool
    attainment: float | None = None
    low: float | None = None
    high: float | None = None
    pass_probability: float | None = None
    widths: tuple[float, float, float, float] | None = None
    """engine speed, fits bootstrap, request noise, trial sampling"""
    speed_from: str = ""
    note: str = ""


@dataclass(frozen=True, slots=True)
class Spread:
    """One store's Monte Carlo predictions at the measured rates, and where the engines' speed
    came from (in words)."""

    store: str
    speed: str
    replications: int
    rows: list[SpreadRow]


def speed_model(model: FleetModel, probes: dict[Path, ProbeDocument]) -> tuple[FleetModel, str]:
    """``model`` with each engine's speed from the newest of ``probes`` (probes of its store,
    oldest first) and what the section says of it; the model as built when there is none or it
    lacks an engine."""
    if not probes:
        return (
            model,
            "each engine's speed from its profile sweep's history (no probe of this store given)",
        )
    path, probe = list(probes.items())[-1]
    newest = f" (the newest of {len(probes)} probes of this store)" if len(probes) > 1 else ""
    missing = [m.iid for m in model.engines if m.iid not in probe.engines]
    if missing:
        return model, (
            f"each engine's speed from its profile sweep's history: probe {path}{newest} has no "
            f"engine {', '.join(missing)}, so predict --calibrate would refuse it"
        )
    return probe_model(model, probe, monte_carlo=True, trust=ProbeTrust()), (
        f"each engine's speed from the freshness probe {path}{newest}, ended "
        f"{probe.created_at}, as predict --calibrate gives it"
    )


def predict_spread(
    runs: list[TrialRun],
    found: StoreModel,
    probes: dict[Path, ProbeDocument],
    replications: int = REPLICATIONS,
) -> Spread:
    """The Monte Carlo prediction at each run's rate (seed ``SEED``)."""
    model, speed = speed_model(found.model, probes)
    shape, target = found.shape, found.target
    rows = []
    for run in runs:
        s = run.summary
        row = SpreadRow(run.manifest.rate, run.path.name, s.good, s.requests, s.passed)
        try:
            p = predict_rate(model, shape, target, run.manifest.rate, replications, SEED)
        except OutsideDomainError as exc:
            rows.append(dataclasses.replace(row, note=f"outside the profiled domain: {exc}"))
            continue
        if p.bound is not None:
            rows.append(
                dataclasses.replace(
                    row,
                    note="beyond the profiled decode concurrency: a miss the throughput bound "
                    f"({p.bound.throughput_bound:.4g} request/s) shows",
                )
            )
            continue
        src = p.spread_sources
        rows.append(
            dataclasses.replace(
                row,
                attainment=p.attainment,
                low=p.attainment_interval.low,
                high=p.attainment_interval.high,
                pass_probability=p.pass_probability,
                widths=None
                if src is None
                else (src.engine_speed, src.fits_bootstrap, src.request_noise, src.trial_sampling),
                speed_from="" if src is None else src.speed_from,
            )
        )
    return Spread(found.store.name, speed, replications, rows)


HEAD = [
    "rate",
    "run",
    "measured (good/requests)",
    "predicted median [5-95 %]",
    "pass probability",
    "engine speed",
    "fits",
    "request noise",
    "trial sampling",
]


def spread_table(spread: Spread) -> Markup:
    """The store's Monte Carlo predictions at each measured rate, with the spread's sources."""
    rows: list[list[object]] = []
    for r in spread.rows:
        measured = join([f"{r.good}/{r.requests} = {r.good / r.requests:.3f} ", badge(r.passed)])
        if r.attainment is None or r.low is None or r.high is None:
            rows.append([f"{r.rate:g}/s", r.run, measured, r.note, "", "", "", "", ""])
            continue
        widths = (
            ["", "", "", ""]
            if r.widths is None
            else [f"{r.widths[0]:.3f} ({r.speed_from})", *(f"{w:.3f}" for w in r.widths[1:])]
        )
        rows.append(
            [
                f"{r.rate:g}/s",
                r.run,
                measured,
                f"{r.attainment:.3f} [{r.low:.3f}, {r.high:.3f}]",
                pct(r.pass_probability),
                *widths,
            ]
        )
    return join(
        [
            tag(
                "p",
                f"Monte Carlo from {spread.store} at each measured rate ({spread.replications} "
                f"replications, seed {SEED}): {spread.speed}. Each source's column is the 5-95 % "
                "width of attainment with that source alone varying (they do not add up to the "
                "range); trial sampling is a trial's binomial width at the median.",
            ),
            table(HEAD, rows),
        ]
    )


def draw_spreads(ax: Any, spreads: list[Spread]) -> None:
    """Each store's Monte Carlo median at the measured rates, with its 5-95 % range (in the
    colour of that store's curve)."""
    for k, spread in enumerate(spreads):
        colour = _svg.SERIES[(k + 1) % len(_svg.SERIES)]
        done = [r for r in spread.rows if r.attainment is not None]
        if not done:
            continue
        ax.errorbar(
            [r.rate for r in done],
            [r.attainment for r in done],
            yerr=[
                [(r.attainment or 0.0) - (r.low or 0.0) for r in done],
                [(r.high or 0.0) - (r.attainment or 0.0) for r in done],
            ],
            fmt="D",
            markersize=5,
            markerfacecolor="none",
            capsize=3,
            color=colour,
            zorder=3,
            label=f"Monte Carlo from {spread.store} (median, 5-95 %)",
        )
