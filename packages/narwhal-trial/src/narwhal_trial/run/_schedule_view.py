"""``summary.json`` ``schedule``: how a scheduled workload's run went, by length and over time.

- ``buckets``: attainment by input length, in power-of-two buckets (``[1, 512)``, ``[512,
  1024)``, ``[1024, 2048)``...; only those holding a request), each with its Wilson interval;
- ``offered``: requests and prompt/output tokens falling due in each ``bin_s``-second bin of the
  run's time axis (after ``--speedup``), at most ``MAX_BINS`` bins;
- ``input_lengths`` and ``output_lengths``: the lengths' histograms (the same power-of-two edges);
- ``densest_second``: the one-second window of due times holding the most requests, and the
  worst lag and the misses among them: the burst the schedule check had to hold through.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from typing import Final

from narwhal_trial._interval import Interval
from narwhal_trial._stats import wilson_interval
from narwhal_trial.documents._records import RequestRecord
from narwhal_trial.documents._schedule import (
    DensestSecond,
    Histogram,
    LengthBucket,
    OfferedLoad,
    ScheduleView,
)
from narwhal_trial.workload._schedule import Schedule

MAX_BINS: Final = 600
FIRST_EDGE: Final = 512
_NS: Final = 1_000_000_000


def edges_for(longest: int) -> list[int]:
    """Power-of-two bucket edges from 1 past ``longest``: 1, 512, 1024, ..., 2^k > longest."""
    edges = [1, FIRST_EDGE]
    while edges[-1] <= longest:
        edges.append(edges[-1] * 2)
    return edges


def bucket_index(edges: Sequence[int], value: int) -> int:
    """The bucket ``[edges[i], edges[i + 1])`` holding ``value`` (the last one for any value
    beyond it)."""
    return min(len(edges) - 2, bisect.bisect_right(edges, value) - 1)


def _histogram(values: Sequence[int]) -> Histogram:
    edges = edges_for(max(values))
    counts = [0] * (len(edges) - 1)
    for v in values:
        counts[bucket_index(edges, v)] += 1
    return Histogram(edges=edges, counts=counts)


def _densest(due_ns: Sequence[int], records: Sequence[RequestRecord]) -> DensestSecond:
    best_i = best_n = 0
    j = 0
    for i, t in enumerate(due_ns):
        while j < len(due_ns) and due_ns[j] < t + _NS:
            j += 1
        if j - i > best_n:
            best_i, best_n = i, j - i
    inside = range(best_i, best_i + best_n)
    by_sequence = {r.sequence: r for r in records}
    mine = [by_sequence[n] for n in inside if n in by_sequence]
    lags = [r.lag_s for r in mine if r.sent]
    return DensestSecond(
        start_s=due_ns[best_i] / _NS,
        requests=best_n,
        max_lag_s=max(lags) if lags else None,
        misses=sum(1 for r in mine if r.status == "client_schedule_miss"),
    )


def schedule_view(
    schedule: Schedule, speedup: float, records: Sequence[RequestRecord]
) -> ScheduleView:
    """The view of a run of ``schedule`` at ``speedup`` from its records (those missing count as
    not good)."""
    due = schedule.offsets_ns(speedup)
    good = {r.sequence for r in records if r.good}
    edges = edges_for(max(schedule.input_tokens))
    totals = [[0, 0] for _ in range(len(edges) - 1)]
    for n, length in enumerate(schedule.input_tokens):
        cell = totals[bucket_index(edges, length)]
        cell[0] += 1
        cell[1] += n in good
    buckets = []
    for i, (count, ok) in enumerate(totals):
        if count:
            low, high = wilson_interval(ok, count)
            buckets.append(
                LengthBucket(
                    low=edges[i],
                    high=edges[i + 1],
                    requests=count,
                    good=ok,
                    attainment=ok / count,
                    interval=Interval(low=low, high=high),
                )
            )
    span_s = due[-1] / _NS
    bin_s = float(max(1, math.ceil(span_s / MAX_BINS)))
    bins = int(span_s // bin_s) + 1
    offered = [[0, 0, 0] for _ in range(bins)]
    for t, i_tok, o_tok in zip(due, schedule.input_tokens, schedule.output_tokens, strict=True):
        cell = offered[min(int(t / _NS // bin_s), bins - 1)]
        cell[0] += 1
        cell[1] += i_tok
        cell[2] += o_tok
    tokens = sum(schedule.input_tokens) + sum(schedule.output_tokens)
    return ScheduleView(
        source=schedule.source.kind,
        speedup=speedup,
        span_s=span_s,
        mean_rate=schedule.mean_rate(speedup),
        offered_token_rate=tokens / span_s if span_s > 0 else 0.0,
        buckets=buckets,
        offered=OfferedLoad(
            bin_s=bin_s,
            requests=[c[0] for c in offered],
            input_tokens=[c[1] for c in offered],
            output_tokens=[c[2] for c in offered],
        ),
        input_lengths=_histogram(schedule.input_tokens),
        output_lengths=_histogram(schedule.output_tokens),
        densest_second=_densest(due, records),
    )


def schedule_lines(view: ScheduleView) -> list[str]:
    """A few lines for ``run``'s stdout: the densest second and attainment per bucket."""
    d = view.densest_second
    lag = "n/a" if d.max_lag_s is None else f"{d.max_lag_s * 1000:.1f} ms"
    buckets = ", ".join(f"[{b.low}, {b.high}) {b.good}/{b.requests}" for b in view.buckets)
    return [
        f"densest second at {d.start_s:.3f} s: {d.requests} requests, max lag {lag}, "
        f"misses {d.misses}",
        f"good by input tokens: {buckets}",
    ]
