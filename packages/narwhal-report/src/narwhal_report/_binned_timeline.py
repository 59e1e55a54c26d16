"""A trial run's timeline aggregated into time bins, readable at thousands of requests and small on
the page: per bin of due time, the offers by outcome, the completed requests' TTFT p50 and p99,
the worst lag; and the peak of requests in flight in each bin of time."""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Final

from narwhal_report import _svg
from narwhal_report._timeline import OUTCOMES, in_flight_steps, outcome
from narwhal_trial import RequestRecord, TrialRun

MAX_BINS: Final = 200
"""At most this many bins: a width of 1, 2 or 5 x 10^k seconds, the smallest that fits."""


def bin_width(span_s: float, max_bins: int = MAX_BINS) -> float:
    """The smallest 1, 2 or 5 x 10^k seconds (at least 1 ms) giving at most ``max_bins`` bins over
    ``span_s``; 1 s for a span of 0."""
    if span_s <= 0:
        return 1.0
    exponent = math.floor(math.log10(span_s / max_bins))
    for k in range(max(exponent, -3), max(exponent, -3) + 3):
        for step in (1, 2, 5):
            width = float(Decimal(step).scaleb(k))
            if math.ceil(span_s / width) <= max_bins:
                return width
    raise AssertionError("unreachable: 10^(k+2) always fits")  # pragma: no cover


@dataclass(frozen=True, slots=True)
class TimelineBins:
    """Bin i covers ``[i * width_s, (i + 1) * width_s)`` seconds from t0 (the last holds its end).

    ``outcomes``: offers due in each bin by outcome (``OUTCOMES``' order); ``ttft_p50_s`` and
    ``ttft_p99_s``: of the completed requests due in the bin (None when it has none); ``max_lag_s``:
    the worst lag (send or miss decision minus due) of its offers; ``peak_in_flight``: the most
    requests in flight at any time in the bin."""

    width_s: float
    outcomes: dict[str, list[int]]
    ttft_p50_s: list[float | None]
    ttft_p99_s: list[float | None]
    max_lag_s: list[float | None]
    peak_in_flight: list[int]

    @property
    def count(self) -> int:
        return len(self.peak_in_flight)

    @property
    def edges(self) -> list[float]:
        return [k * self.width_s for k in range(self.count + 1)]


def _percentile(values: Sequence[float], q: float) -> float | None:
    import numpy as np

    return float(np.percentile(np.asarray(values), q)) if values else None


def timeline_bins(records: Sequence[RequestRecord], max_bins: int = MAX_BINS) -> TimelineBins:
    """The records' timeline in at most ``max_bins`` bins from t0 to the last due time or end."""
    times = [r.due_s for r in records] + [
        t for r in records for t in (r.sent_s, r.end_s) if t is not None
    ]
    span = max(times, default=0.0)
    width = bin_width(span, max_bins)
    n = max(1, math.ceil(span / width))

    def index(t: float) -> int:
        return min(max(int(t // width), 0), n - 1)

    outcomes = {name: [0] * n for name, _ in OUTCOMES}
    ttft: list[list[float]] = [[] for _ in range(n)]
    lags: list[float | None] = [None] * n
    for r in records:
        i = index(r.due_s)
        outcomes[outcome(r)][i] += 1
        if r.status == "completed" and r.ttft_s is not None:
            ttft[i].append(r.ttft_s)
        worst = lags[i]
        lags[i] = r.lag_s if worst is None else max(worst, r.lag_s)
    steps, levels = in_flight_steps(list(records))
    peak = [levels[bisect_right(steps, k * width) - 1] for k in range(n)]  # level carried in
    for t, level in zip(steps, levels, strict=True):
        i = index(t)
        peak[i] = max(peak[i], level)
    return TimelineBins(
        width_s=width,
        outcomes=outcomes,
        ttft_p50_s=[_percentile(v, 50) for v in ttft],
        ttft_p99_s=[_percentile(v, 99) for v in ttft],
        max_lag_s=lags,
        peak_in_flight=peak,
    )


def _ms(values: Sequence[float | None]) -> list[float]:
    return [math.nan if v is None else v * 1000 for v in values]


def binned_timeline_figure(run: TrialRun, bins: TimelineBins, pace: str) -> str:
    """Offers by outcome stacked per bin; TTFT p50 and p99 against the SLO; the worst lag against
    ``--max-lag``; the peak in flight against ``--max-in-flight`` (``pace``: for the title)."""
    import numpy as np

    limits = run.manifest.limits
    fig, axes = _svg.new_figure(
        4, 1, size=(9.0, 7.0), sharex=True, gridspec_kw={"height_ratios": [2.2, 1.4, 1.1, 1.1]}
    )
    offers_ax, ttft_ax, lag_ax, flight_ax = (axes[k][0] for k in range(4))
    edges = np.asarray(bins.edges)
    mids = (edges[:-1] + edges[1:]) / 2
    lower = np.zeros(bins.count)
    for name, colour in OUTCOMES:
        counts = np.asarray(bins.outcomes[name], dtype=float)
        if counts.any():
            total = int(counts.sum())
            offers_ax.stairs(lower + counts, edges, baseline=lower, fill=True, color=colour,
                             linewidth=0, label=f"{name} {total}")  # fmt: skip
        lower = lower + counts
    offers_ax.set_ylabel(f"offers per {bins.width_s:g} s")
    offers_ax.set_ylim(0, max(float(lower.max()), 1.0) * 1.3)  # room for the legend
    if lower.any():  # a legend of no outcome would warn
        offers_ax.legend(loc="upper right", ncols=3, fontsize=7)
    offers_ax.set_title(
        f"{run.path.name}: {len(run.records)} offers {pace}, in {bins.count} bins of "
        f"{bins.width_s:g} s"
    )
    _svg.integer_ticks(offers_ax.yaxis)
    ttft_ax.step(mids, _ms(bins.ttft_p50_s), where="mid", color=_svg.BLUE, label="TTFT p50")
    ttft_ax.step(mids, _ms(bins.ttft_p99_s), where="mid", color=_svg.SKY, label="TTFT p99")
    slo = Decimal(run.manifest.ttft_s)
    ttft_ax.axhline(float(slo) * 1000, color=_svg.ERROR, linestyle="--", label=f"SLO {slo} s")
    ttft_ax.set_ylabel("TTFT (ms)")
    ttft_ax.set_ylim(bottom=0)
    ttft_ax.legend(loc="upper right", ncols=3, fontsize=7)
    lag_ax.step(mids, _ms(bins.max_lag_s), where="mid", color=_svg.MISS, label="worst lag")
    lag_ax.axhline(limits.max_lag_s * 1000, color=_svg.ERROR, linestyle="--",
                   label=f"max lag {limits.max_lag_s * 1000:g} ms")  # fmt: skip
    lag_ax.set_ylabel("lag (ms)")
    lag_ax.legend(loc="upper right", ncols=2, fontsize=7)
    flight_ax.stairs(bins.peak_in_flight, edges, color=_svg.BLUE, label="peak in flight")
    top = max(max(bins.peak_in_flight) * 1.15, 1)
    if limits.max_in_flight <= top * 2:
        flight_ax.axhline(limits.max_in_flight, color=_svg.ERROR, linestyle="--",
                          label=f"cap {limits.max_in_flight}")  # fmt: skip
        top = max(top, limits.max_in_flight * 1.1)
    else:
        flight_ax.plot([], [], color=_svg.ERROR, linestyle="--",
                       label=f"cap {limits.max_in_flight} (off scale)")  # fmt: skip
    flight_ax.set_ylim(0, top)
    flight_ax.set_ylabel("in flight")
    flight_ax.set_xlabel("time since t0 (s)")
    flight_ax.legend(loc="upper right", ncols=2, fontsize=7)
    _svg.integer_ticks(flight_ax.yaxis)
    return _svg.to_svg(fig, f"binned timeline of {run.path.name}")


__all__ = ["MAX_BINS", "OUTCOMES", "TimelineBins", "bin_width", "binned_timeline_figure",
           "outcome", "timeline_bins"]  # fmt: skip
