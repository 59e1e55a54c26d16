"""Across the trials of one workload: measured attainment against rate, and beside it the curve
``load_trial.py predict`` gives from a profile store (in virtual time; no engine is contacted)
and its Monte Carlo prediction at each measured rate (``_sweep_spread``)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from narwhal_report import _svg
from narwhal_report._html import Markup, Section, badge, esc, figure, join, slug, table, tag
from narwhal_report._sweep_model import StoreModel
from narwhal_report._sweep_spread import Spread, draw_spreads, spread_table
from narwhal_trial import (
    OutsideDomainError,
    Summary,
    TrialRun,
    find_max_rate,
    predict_rate,
)

CURVE_POINTS = 24


@dataclass(frozen=True, slots=True)
class Curve:
    """A predicted attainment curve: rates, attainment and its fit-residual band; the highest rate
    predicted to pass; a note on where it stops."""

    label: str
    rates: list[float]
    attainment: list[float]
    low: list[float]
    high: list[float]
    max_rate: float | None
    note: str


def workload_groups(runs: list[TrialRun]) -> list[list[TrialRun]]:
    """Runs of one workload and target (same workload file, shape, SLO and request count), each
    group ordered by rate; groups in the order of their first run."""
    groups: dict[tuple[object, ...], list[TrialRun]] = defaultdict(list)
    for run in runs:
        m = run.manifest
        key = (
            m.workload_digest,
            m.input_tokens,
            m.output_tokens,
            m.requests,
            m.ttft_s,
            m.tpot_s,
            m.attainment,
        )
        groups[key].append(run)
    return [sorted(g, key=lambda r: r.manifest.rate) for g in groups.values()]


def predict_curve(runs: list[TrialRun], found: StoreModel) -> Curve:
    """The curve the fits alone predict over rates around the measured ones."""
    model, shape, target = found.model, found.shape, found.target
    measured = [r.manifest.rate for r in runs]
    search = find_max_rate(model, shape, target, min(measured))
    lo = min(measured) / 4
    hi = max(max(measured) * 2, (search.max_rate or 0.0) * 1.25)
    grid = sorted(
        {lo * (hi / lo) ** (k / (CURVE_POINTS - 1)) for k in range(CURVE_POINTS)}
        | set(measured)
        | ({search.max_rate} if search.max_rate is not None else set())
    )
    rates: list[float] = []
    att: list[float] = []
    low: list[float] = []
    high: list[float] = []
    note = ""
    for rate in grid:
        try:
            p = predict_rate(model, shape, target, rate)
        except OutsideDomainError as exc:
            note = f"stops at {rate:.3g} request/s: {exc}"
            break
        if p.bound is not None:
            note = (
                f"stops at {rate:.3g} request/s, beyond the profiled decode concurrency: a miss "
                f"the throughput bound ({p.bound.throughput_bound:.4g} request/s) shows"
            )
            break
        rates.append(rate)
        att.append(p.attainment)
        low.append(p.attainment_interval.low)
        high.append(p.attainment_interval.high)
    return Curve(
        f"predicted from {found.store.name}",
        rates,
        att,
        low,
        high,
        search.max_rate,
        note or search.detail,
    )


def sweep_section(
    runs: list[TrialRun],
    index: int,
    curves: list[Curve],
    notes: list[str],
    spreads: Sequence[Spread] = (),
) -> Section:
    """Attainment against rate for one workload group, with any predicted curves and each
    store's Monte Carlo prediction at the measured rates."""
    m = runs[0].manifest
    rows = []
    for run in runs:
        s = run.summary
        rows.append(
            [
                f"{run.manifest.rate:g}/s",
                run.path.name,
                f"{s.good}/{s.requests}",
                f"{s.attainment:.3f} [{s.attainment_interval.low:.3f}, "
                f"{s.attainment_interval.high:.3f}]",
                badge(s.passed),
                badge(s.client_schedule_valid, "VALID", "INVALID"),
            ]
        )
    lines = [
        f"{c.label}: highest passing rate "
        + ("none" if c.max_rate is None else f"{c.max_rate:.3g} request/s")
        + (f" ({c.note})" if c.note else "")
        for c in curves
    ] + notes
    body = join(
        [
            tag(
                "p",
                f"{len(runs)} run(s) of workload {m.workload_digest[:16]}…: {m.requests} x "
                f"{m.input_tokens} in / {m.output_tokens} out, TTFT ≤ {m.ttft_s} s, TPOT ≤ "
                f"{m.tpot_s} s, attainment ≥ {m.attainment}",
                class_="sub",
            ),
            figure(
                sweep_figure(runs, curves, spreads),
                "Measured attainment (with its 95% interval) at each "
                "rate run, the target, and the attainment predicted from the profiles (line: the "
                "fits alone; band: every fit off by its worst residual; dotted: the highest rate "
                "predicted to pass"
                + (
                    "; hollow diamonds: the Monte Carlo median at each measured rate with its "
                    "5-95 % range)."
                    if spreads
                    else ")."
                ),
            ),
            table(["rate", "run", "good", "attainment [95%]", "verdict", "schedule"], rows),
            tag("ul", join(tag("li", esc(line)) for line in lines)) if lines else Markup(""),
            join(spread_table(s) for s in spreads),
        ]
    )
    title = (
        f"Attainment against rate ({m.model}, {m.requests} x {m.input_tokens} in / "
        f"{m.output_tokens} out, TTFT ≤ {m.ttft_s} s, TPOT ≤ {m.tpot_s} s, workload "
        f"{m.workload_digest[:8]})"
    )
    return Section(slug("sweep", index), title, body)


def draw_measured(ax: Any, rate: float, summary: Summary, colour: str) -> None:
    """One trial's attainment at its rate, with its 95 % interval."""
    ax.errorbar(
        [rate],
        [summary.attainment],
        yerr=[
            [summary.attainment - summary.attainment_interval.low],
            [summary.attainment_interval.high - summary.attainment],
        ],
        fmt="o",
        capsize=4,
        color=colour,
        zorder=4,
    )


def finish_attainment_axes(ax: Any, target: float) -> None:
    """The target line, the axes' labels and limits, the legend."""
    ax.axhline(target, color=_svg.INK, linestyle="--", label=f"target {target:g}")
    ax.set_xlabel("offered rate (request/s)")
    ax.set_ylabel("attainment")
    ax.set_ylim(0, 1.04)
    ax.set_xlim(left=0)
    ax.legend(loc="lower left", fontsize=7)


def sweep_figure(runs: list[TrialRun], curves: list[Curve], spreads: Sequence[Spread] = ()) -> str:
    """Measured points with intervals, the target line, the predicted curves and Monte Carlo
    ranges."""
    fig, axes = _svg.new_figure(1, 1, size=(9.0, 3.4))
    ax = axes[0][0]
    draw_curves(ax, curves)
    draw_spreads(ax, list(spreads))
    for run in runs:
        colour = _svg.GOOD if run.summary.passed else _svg.ERROR
        draw_measured(ax, run.manifest.rate, run.summary, colour)
    ax.plot([], [], "o", color=_svg.GOOD, label="measured, pass")
    ax.plot([], [], "o", color=_svg.ERROR, label="measured, miss")
    finish_attainment_axes(ax, float(Decimal(runs[0].manifest.attainment)))
    return _svg.to_svg(fig, "attainment against rate")


def draw_curves(ax: Any, curves: list[Curve]) -> None:
    """Each predicted curve with its fit-residual band and its highest passing rate (dotted)."""
    for k, curve in enumerate(curves):
        colour = _svg.SERIES[(k + 1) % len(_svg.SERIES)]
        ax.fill_between(curve.rates, curve.low, curve.high, color=colour, alpha=0.18, linewidth=0)
        ax.plot(curve.rates, curve.attainment, color=colour, label=curve.label)
        if curve.max_rate is not None:
            ax.axvline(
                curve.max_rate,
                color=colour,
                linestyle=":",
                label=f"predicted highest pass {curve.max_rate:.3g}/s",
            )
