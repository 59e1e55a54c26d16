"""Reading the engines' and the router's ``/metrics`` around the measured phase, and the deltas.

``MetricsTarget`` names one page (an engine of ``--fleet``, an ``--engine-metrics`` URL, or the
``--base`` page). ``read_pages`` GETs every target at once with a short timeout; a page that cannot
be read or parsed is a ``PageReading`` with ``ok: false`` and never raises. ``page_delta`` turns a
target's two readings into a ``ServerPage``: every histogram family summed over its label sets,
bucket by bucket, and every counter sample, as the increase between the readings.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal

from narwhal_engine_client import EngineClient, EngineClientError, MetricsSnapshot
from narwhal_trial.documents._server import CounterDelta, HistogramDelta, PageReading, ServerPage

Role = Literal["prefill", "decode", "mixed"]
PAGE_TIMEOUT_S = 5.0
"""A page that does not answer within this is recorded as missing: the run never waits longer."""

TTFT = "vllm:time_to_first_token_seconds"
E2E = "vllm:e2e_request_latency_seconds"
QUEUE = "vllm:request_queue_time_seconds"
PREFILL = "vllm:request_prefill_time_seconds"
DECODE = "vllm:request_decode_time_seconds"
SUCCESS = "vllm:request_success_total"
ITL = ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds")
"""Inter-token latency: its 0.10.2+ name, then the name it had before (hidden from 0.12)."""
READ_FAMILIES = (TTFT, E2E, QUEUE, PREFILL, DECODE, "vllm:request_time_per_output_token_seconds")
"""The histogram families the comparison reads; an engine page without one lists it as missing
(vLLM 0.10.2 has no request_time_per_output_token; every version has TTFT and e2e)."""


@dataclass(frozen=True, slots=True)
class MetricsTarget:
    """One ``/metrics`` page to read around the run."""

    name: str
    kind: Literal["engine", "router"]
    base_url: str
    role: Role | None = None


@dataclass(frozen=True, slots=True)
class Reading:
    """One GET: the parsed page, or why there is none."""

    reading: PageReading
    snapshot: MetricsSnapshot | None


async def _read(target: MetricsTarget, client: EngineClient | None) -> Reading:
    wall = datetime.now(UTC).isoformat(timespec="milliseconds")
    start = time.perf_counter()
    owned = client is None
    http = client or EngineClient(target.base_url, timeout_s=PAGE_TIMEOUT_S)
    try:
        snapshot = await asyncio.wait_for(http.metrics(), PAGE_TIMEOUT_S)
    except (EngineClientError, TimeoutError, OSError) as exc:
        why = f"no answer within {PAGE_TIMEOUT_S:g} s" if isinstance(exc, TimeoutError) else exc
        elapsed = time.perf_counter() - start
        failed = PageReading(ok=False, error=str(why), wall_time=wall, elapsed_s=elapsed)
        return Reading(failed, None)
    finally:
        if owned:
            await http.aclose()
    elapsed = time.perf_counter() - start
    return Reading(PageReading(ok=True, error=None, wall_time=wall, elapsed_s=elapsed), snapshot)


async def read_pages(
    targets: Sequence[MetricsTarget], base_client: EngineClient | None = None
) -> list[Reading]:
    """Every target's page at once; the ``--base`` page through ``base_client`` when given (its
    target's ``base_url`` equal to the client's)."""

    def client_for(t: MetricsTarget) -> EngineClient | None:
        if base_client is not None and t.base_url.rstrip("/") == base_client.base_url:
            return base_client
        return None

    return list(await asyncio.gather(*(_read(t, client_for(t)) for t in targets)))


def _label_key(labels: dict[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(labels.items()))


@dataclass(slots=True)
class _Cumulative:
    """One histogram family of one reading, summed over its label sets."""

    buckets: dict[float, float] = field(default_factory=dict)  # finite bound -> cumulative count
    sum: float = 0.0
    count: float = 0.0


def _histograms(snapshot: MetricsSnapshot) -> dict[str, _Cumulative]:
    """Each histogram family's cumulative bucket counts by finite bound, sum and count."""
    out: dict[str, _Cumulative] = {}
    for family in snapshot.families.values():
        if family.type != "histogram":
            continue
        acc = out.setdefault(family.name, _Cumulative())
        for s in family.samples:
            if s.name.endswith("_bucket"):
                bound = float(s.labels.get("le", "nan"))
                if math.isfinite(bound):
                    acc.buckets[bound] = acc.buckets.get(bound, 0.0) + s.value
            elif s.name.endswith("_sum"):
                acc.sum += s.value
            elif s.name.endswith("_count"):
                acc.count += s.value
    return out


def _histogram_delta(before: _Cumulative, after: _Cumulative) -> HistogramDelta:
    bounds = sorted(after.buckets)
    cumulative = [max(0.0, after.buckets[b] - before.buckets.get(b, 0.0)) for b in bounds]
    count = max(0.0, after.count - before.count)
    counts: list[int] = []
    previous = 0.0
    for c in cumulative:
        counts.append(round(max(0.0, c - previous)))
        previous = max(previous, c)
    counts.append(round(max(0.0, count - previous)))
    return HistogramDelta(
        bounds=bounds, counts=counts, count=round(count), sum=max(0.0, after.sum - before.sum)
    )


def _counters(snapshot: MetricsSnapshot) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in snapshot.families.values():
        # prometheus_client's text parser files ``name_total`` samples under a family of their
        # own, typed unknown, when the ``# TYPE`` line names the counter without ``_total``
        if family.type not in ("counter", "unknown"):
            continue
        for s in family.samples:
            if family.type == "unknown" and not s.name.endswith("_total"):
                continue
            if s.name.endswith("_created"):
                continue
            key = (s.name, _label_key(s.labels))
            out[key] = out.get(key, 0.0) + s.value
    return out


def page_delta(target: MetricsTarget, before: Reading, after: Reading, url: str) -> ServerPage:
    """The target's ``ServerPage``: deltas when both readings parsed and the process did not
    restart, else empty deltas with the readings saying why."""
    b, a = before.snapshot, after.snapshot
    restarted: bool | None = None
    histograms: dict[str, HistogramDelta] = {}
    counters: list[CounterDelta] = []
    missing: list[str] = []
    if b is not None and a is not None:
        t0, t1 = b.process_start_time_seconds, a.process_start_time_seconds
        restarted = None if t0 is None or t1 is None else t0 != t1
        if not restarted:
            hb, ha = _histograms(b), _histograms(a)
            histograms = {
                name: _histogram_delta(hb[name], ha[name]) for name in sorted(ha) if name in hb
            }
            cb, ca = _counters(b), _counters(a)
            counters = [
                CounterDelta(name=name, labels=dict(labels), delta=max(0.0, v - cb[(name, labels)]))
                for (name, labels), v in sorted(ca.items())
                if (name, labels) in cb
            ]
        if target.kind == "engine":
            have = set(_histograms(a))
            missing = [f for f in (*READ_FAMILIES, ITL[0]) if f not in have]
            if ITL[0] in missing and ITL[1] in have:
                missing.remove(ITL[0])
    return ServerPage(
        name=target.name,
        kind=target.kind,
        role=target.role,
        url=url,
        before=before.reading,
        after=after.reading,
        restarted=restarted,
        histograms=histograms,
        counters=counters,
        missing=missing,
    )
