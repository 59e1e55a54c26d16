"""The client's records against the engines' own metrics: counts, TTFT, the graded gap.

A histogram knows its observations' exact sum and count, and of each observation only its
bucket. So the server's mean TTFT is exact, and its quantiles are intervals (the bucket that
holds the rank). The client-added TTFT is the client's mean minus the server's (exact), and the
client's exact quantile minus the server quantile's interval. The gap is graded on the means:
under 2 % of the client's mean TTFT negligible, up to 10 % normal, beyond that elevated.

The fleet's serving engines are its ``decode`` and ``mixed`` ones (and any engine without a role):
they stream to the client. A split request is prefilled by a ``prefill`` engine first, so the
fleet's server TTFT is then the prefill engines' e2e plus the serving engines' TTFT (exact for the
mean, since every split request adds one of each; quantiles of the sum need spans).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from narwhal_trial.documents._records import RequestRecord
from narwhal_trial.documents._server import (
    EngineView,
    FleetView,
    Grade,
    HistogramDelta,
    HistogramView,
    QuantileInterval,
    ServerPage,
    ServerView,
    SpanView,
    TtftGap,
)
from narwhal_trial.server._pages import DECODE, E2E, PREFILL, QUEUE, SUCCESS, TTFT

DONE_REASONS = frozenset({"stop", "length"})
ABORT_REASONS = frozenset({"abort", "error"})


def grade(fraction: float) -> Grade:
    """AIPerf's grading of the client-added share of the mean."""
    size = abs(fraction)
    return "negligible" if size < 0.02 else "normal" if size <= 0.10 else "elevated"


def quantile_interval(h: HistogramDelta, q: float) -> QuantileInterval | None:
    """The bucket (low, high] holding the ``q`` quantile's rank (nearest rank); None if empty."""
    if h.count <= 0:
        return None
    rank = max(1, math.ceil(q * h.count))
    running = 0
    for i, count in enumerate(h.counts):
        running += count
        if running >= rank:
            low = h.bounds[i - 1] if i > 0 else 0.0
            high = h.bounds[i] if i < len(h.bounds) else None
            return QuantileInterval(low=low, high=high)
    return QuantileInterval(low=h.bounds[-1] if h.bounds else 0.0, high=None)


def view(h: HistogramDelta | None) -> HistogramView | None:
    """Mean and p50/p99 intervals of one histogram delta."""
    if h is None:
        return None
    return HistogramView(
        count=h.count,
        mean_s=h.sum / h.count if h.count else None,
        p50_s=quantile_interval(h, 0.50),
        p99_s=quantile_interval(h, 0.99),
    )


def merge(deltas: Sequence[HistogramDelta]) -> HistogramDelta | None:
    """One histogram of several with the same bounds (None when the bounds differ or none)."""
    if not deltas or any(d.bounds != deltas[0].bounds for d in deltas):
        return None
    counts = [sum(c) for c in zip(*(d.counts for d in deltas), strict=True)]
    return HistogramDelta(
        bounds=list(deltas[0].bounds),
        counts=counts,
        count=sum(d.count for d in deltas),
        sum=math.fsum(d.sum for d in deltas),
    )


def _finished(page: ServerPage, reasons: frozenset[str]) -> int:
    return round(
        sum(
            c.delta
            for c in page.counters
            if c.name == SUCCESS and c.labels.get("finished_reason") in reasons
        )
    )


def _usable(page: ServerPage) -> bool:
    return page.before.ok and page.after.ok and page.restarted is not True


def _subtract(value: float, interval: QuantileInterval | None) -> QuantileInterval | None:
    if interval is None:
        return None
    low = None if interval.high is None else value - interval.high
    return QuantileInterval(low=low, high=None if interval.low is None else value - interval.low)


def _gap(
    client: Sequence[float], server_mean: float, merged: HistogramDelta | None
) -> TtftGap | None:
    if not client:
        return None
    arr = np.asarray(client, dtype=np.float64)
    mean = float(arr.mean())
    p50, p99 = (float(v) for v in np.percentile(arr, (50, 99)))
    s50 = quantile_interval(merged, 0.50) if merged is not None else None
    s99 = quantile_interval(merged, 0.99) if merged is not None else None
    fraction = (mean - server_mean) / mean if mean > 0 else 0.0
    return TtftGap(
        client_mean_s=mean,
        server_mean_s=server_mean,
        added_mean_s=mean - server_mean,
        client_p50_s=p50,
        client_p99_s=p99,
        server_p50_s=s50,
        server_p99_s=s99,
        added_p50_s=_subtract(p50, s50),
        added_p99_s=_subtract(p99, s99),
        gap_fraction=fraction,
        grade=grade(fraction),
    )


def _fleet(
    engines: Sequence[ServerPage], client: Sequence[float], warnings: list[str]
) -> FleetView:
    usable = all(_usable(p) for p in engines)
    serving = [p for p in engines if p.role != "prefill"]
    prefill = [p for p in engines if p.role == "prefill"]
    fleet = FleetView(
        client_completed=len(client),
        server_completed=None,
        prefill_completed=None,
        ttft_method=None,
        ttft=None,
    )
    if not engines or not usable:
        return fleet
    fleet.server_completed = sum(_finished(p, DONE_REASONS) for p in serving)
    if prefill:
        fleet.prefill_completed = sum(_finished(p, DONE_REASONS) for p in prefill)
    if fleet.server_completed != len(client):
        warnings.append(
            f"the serving engines finished {fleet.server_completed} requests during the run, the "
            f"client recorded {len(client)} completed"
        )
    ttfts = [p.histograms.get(TTFT) for p in serving]
    e2es = [p.histograms.get(E2E) for p in prefill]
    if any(h is None for h in [*ttfts, *e2es]) or not serving:
        return fleet
    have = [h for h in ttfts if h is not None]
    count = sum(h.count for h in have)
    if count == 0:
        return fleet
    total = math.fsum(h.sum for h in have) + math.fsum(h.sum for h in e2es if h is not None)
    merged = None if prefill else merge(have)
    fleet.ttft_method = "prefill e2e + serving ttft" if prefill else "engines"
    fleet.ttft = _gap(client, total / count, merged)
    return fleet


def compare(
    pages: Sequence[ServerPage],
    records: Sequence[RequestRecord],
    spans: SpanView | None = None,
) -> ServerView:
    """The summary's ``server`` part."""
    warnings: list[str] = []
    for page in pages:
        for when, reading in (("before", page.before), ("after", page.after)):
            if not reading.ok:
                warnings.append(f"{page.name}: /metrics not read {when} the run: {reading.error}")
        if page.restarted:
            warnings.append(f"{page.name}: the process restarted during the run (no deltas)")
    engines = [p for p in pages if p.kind == "engine"]
    client = [r.ttft_s for r in records if r.status == "completed" and r.ttft_s is not None]
    fleet = _fleet(engines, client, warnings)
    serving_total = fleet.server_completed or 0
    by_engine: dict[str, list[float]] = {}
    for r in records:
        if r.server is not None and r.server.engine is not None:
            by_engine.setdefault(r.server.engine, []).append(r.server.client_added_ttft_s)
    rows: list[EngineView] = []
    for p in engines:
        ok = _usable(p)
        done = _finished(p, DONE_REASONS) if ok else None
        added = by_engine.get(p.name)
        rows.append(
            EngineView(
                name=p.name,
                role=p.role,
                read=ok,
                completed=done,
                aborted=_finished(p, ABORT_REASONS) if ok else None,
                share=(done / serving_total)
                if done is not None and serving_total and p.role != "prefill"
                else None,
                ttft=view(p.histograms.get(TTFT)),
                queue=view(p.histograms.get(QUEUE)),
                prefill=view(p.histograms.get(PREFILL)),
                decode=view(p.histograms.get(DECODE)),
                e2e=view(p.histograms.get(E2E)),
                client_added_ttft_s=float(np.median(added)) if added else None,
            )
        )
    if spans is not None and spans.client_only:
        warnings.append(
            f"{spans.client_only} completed requests have no server span "
            f"(first: {', '.join(spans.client_only_ids[:3])})"
        )
    if spans is not None and spans.server_only:
        warnings.append(
            f"{spans.server_only} server spans match no client record of this run "
            f"(first: {', '.join(spans.server_only_ids[:3])})"
        )
    return ServerView(
        pages=sum(1 for p in pages if p.before.ok and p.after.ok),
        missing_pages=[p.name for p in pages if not (p.before.ok and p.after.ok)],
        fleet=fleet,
        engines=rows,
        warnings=warnings,
        spans=spans,
    )
