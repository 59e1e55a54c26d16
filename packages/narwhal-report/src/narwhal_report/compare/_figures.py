"""A comparison's figures, both sides on each: the TTFT and TPOT distributions of a rate pair
overlaid with the SLO lines, attainment against rate with each side's measured edge bracket, and
each engine's fitted-latency ratio B / A with its interval."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from narwhal_report import _svg
from narwhal_report._sweep_section import finish_attainment_axes
from narwhal_report.compare._inputs import Compared
from narwhal_trial import CompareSide, FitChange, TrialRun

SIDE_COLOUR = {"A": _svg.BLUE, "B": _svg.SLOW}
"""Each side's colour on every figure (A blue, B orange)."""
SIDE_MARKER = {"A": "o", "B": "s"}
DODGE = 0.012
"""How far each side's points move off their rate (a fraction of it), so A and B at one rate
stay apart."""
_VERDICT_COLOUR = {"better": _svg.GOOD, "worse": _svg.ERROR, "no detectable difference": _svg.GREY}


def latencies(run: TrialRun, measure: str) -> list[float]:
    """Every measured TTFT or TPOT of ``run``'s records (seconds): the values compare judged."""
    values = (getattr(r, f"{measure}_s") for r in run.records)
    return [float(v) for v in values if v is not None]


def cdf_pair_figure(run_a: TrialRun, run_b: TrialRun, label: str) -> str:
    """TTFT and TPOT side by side, A's and B's cumulative distributions overlaid (one legend for
    both panels, each panel's title with the counts), the SLO bounds dashed and named beside
    their line, the p50 and p99 levels dotted."""
    from matplotlib.lines import Line2D

    fig, axes = _svg.new_figure(1, 2, size=(9.0, 3.4))
    for ax, measure, bound in (
        (axes[0][0], "ttft", Decimal(run_a.manifest.ttft_s)),
        (axes[0][1], "tpot", Decimal(run_a.manifest.tpot_s)),
    ):
        counts = []
        for side, run in (("A", run_a), ("B", run_b)):
            values = latencies(run, measure)
            counts.append(f"{side} {len(values)}")
            _cdf(ax, values, side)
        for level in (0.5, 0.99):
            ax.axhline(level, color=_svg.GREY, linestyle=":", linewidth=0.8)
        slo = float(bound) * 1000
        ax.axvline(slo, color=_svg.ERROR, linestyle="--")
        ax.text(slo, 0.04, f"SLO {bound} s ", color=_svg.ERROR, rotation=90, ha="right",
                va="bottom", fontsize=7.5)  # fmt: skip
        what = measure.upper()
        ax.set_xlabel(f"{what} (ms)")
        ax.set_ylabel("fraction ≤ x")
        ax.set_ylim(0, 1.02)
        ax.set_xlim(left=0)
        ax.set_yticks([0, 0.25, 0.5, 0.75, 0.99])
        ax.set_title(f"{what} ({', '.join(counts)} measured)")
    handles = [
        Line2D([], [], color=SIDE_COLOUR[side], label=f"{side}: {run.path.name}")
        for side, run in (("A", run_a), ("B", run_b))
    ]
    fig.legend(handles=handles, loc="outside lower center", ncol=2)
    return _svg.to_svg(fig, f"TTFT and TPOT distributions, A and B, {label}")


def _cdf(ax: Any, values: list[float], side: str) -> None:
    import numpy as np

    if values:
        xs = np.sort(np.asarray(values)) * 1000
        ys = np.arange(1, len(xs) + 1) / len(xs)
        ax.step(xs, ys, where="post", color=SIDE_COLOUR[side])


def attainment_figure(compared: Compared) -> str:
    """Every run of both sides at its rate with its 95 % interval (filled: passed, hollow:
    missed), the target, and each edge side's measured bracket (A the upper half, B the
    lower)."""
    fig, axes = _svg.new_figure(1, 1, size=(9.0, 3.6))
    ax = axes[0][0]
    for half, side in ((1, compared.a), (0, compared.b)):
        _bracket(ax, side, half)
    for sign, side in ((-1, compared.a), (1, compared.b)):
        _side_points(ax, side, 1 + sign * DODGE)
    ax.plot([], [], "o", color=_svg.GREY, label="filled: passed")
    ax.plot([], [], "o", color=_svg.GREY, markerfacecolor="white", label="hollow: missed")
    target = float(Decimal(compared.a.runs[0].manifest.attainment))
    finish_attainment_axes(ax, target)
    ax.set_xlim(0, max(_rates(compared.a) + _rates(compared.b)) * (1 + 8 * DODGE))
    return _svg.to_svg(fig, "attainment against rate, A and B")


def _rates(side: CompareSide) -> list[float]:
    """Every rate ``side`` ran, and its bracket's ends."""
    rates = [r.manifest.rate for r in side.every_run]
    if side.edge is not None:
        b = side.edge.search.bracket
        rates += [v for v in (b.highest_pass, b.lowest_miss) if v is not None]
    return rates


def _side_points(ax: Any, side: CompareSide, dodge: float) -> None:
    colour, marker = SIDE_COLOUR[side.label], SIDE_MARKER[side.label]
    for run in side.every_run:
        s = run.summary
        ax.errorbar(
            [run.manifest.rate * dodge],
            [s.attainment],
            yerr=[[s.attainment - s.attainment_interval.low],
                  [s.attainment_interval.high - s.attainment]],
            fmt=marker, capsize=3, color=colour, zorder=4,
            markerfacecolor=colour if s.passed else "white",
        )  # fmt: skip
    ax.plot([], [], marker, color=colour, label=f"{side.label} {side.path.name}")


def _bracket(ax: Any, side: CompareSide, half: int) -> None:
    """``side``'s measured bracket as a band over one half of the axes' height."""
    if side.edge is None:
        return
    b = side.edge.search.bracket
    if b.highest_pass is None or b.lowest_miss is None:
        return
    ax.axvspan(
        b.highest_pass, b.lowest_miss, ymin=half * 0.5, ymax=half * 0.5 + 0.5,
        color=SIDE_COLOUR[side.label], alpha=0.16, linewidth=0,
        label=f"{side.label} measured bracket {b.highest_pass:.4g} to {b.lowest_miss:.4g}/s",
    )  # fmt: skip


def fit_ratio_figure(profiles: list[FitChange]) -> str:
    """Each engine's fitted latency B / A at each point with its interval, 1 (no change) as a
    line, coloured by verdict (green better, red worse, grey no detectable difference)."""
    rows = len(profiles)
    fig, axes = _svg.new_figure(1, 1, size=(9.0, 0.9 + 0.24 * rows))
    ax = axes[0][0]
    for y, change in enumerate(reversed(profiles)):
        ax.errorbar(
            [change.ratio], [y], xerr=[[change.ratio - change.low], [change.high - change.ratio]],
            fmt="o", capsize=3, color=_VERDICT_COLOUR[change.verdict],
        )  # fmt: skip
    ax.axvline(1.0, color=_svg.INK, linestyle="--", linewidth=0.8)
    ax.set_yticks(range(rows))
    ax.set_yticklabels([f"{c.engine} {c.phase} at {c.at}" for c in reversed(profiles)])
    ax.set_ylim(-0.7, rows - 0.3)
    ax.set_xlabel("B / A fitted latency")
    ax.grid(axis="y", visible=False)
    return _svg.to_svg(fig, "fitted latency of B over A per engine and point")
