"""The server's side of a test run folder: ``server.json`` (each engine's and the router's page
deltas, built from the run's own records), the summary's ``server`` (through the trial's own
comparison) and, with spans, each record's ``server`` timings (through the trial's own join)."""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import orjson

from narwhal_trial import (
    CounterDelta,
    HistogramDelta,
    PageReading,
    ReceiverFacts,
    RequestRecord,
    ServerDoc,
    ServerPage,
    read_run,
)
from narwhal_trial.server._compare import compare
from narwhal_trial.server._spans import attach, join

BOUNDS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
          10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0]  # fmt: skip
"""vLLM's TTFT bucket bounds (seconds)."""
SHORT_BOUNDS = BOUNDS[: BOUNDS.index(1.0) + 1]
"""An engine whose histogram ends at 1 s (another vLLM version's buckets)."""
ENGINES = {"h200-0.decode": "decode", "h200-1.mixed": "mixed"}
ROUTER = "router"
ABORTED = {"h200-0.decode": 0, "h200-1.mixed": 2}
TTFT = "vllm:time_to_first_token_seconds"
FAMILIES = {
    TTFT: "ttft",
    "vllm:request_queue_time_seconds": "queue",
    "vllm:request_prefill_time_seconds": "prefill",
    "vllm:request_decode_time_seconds": "decode",
    "vllm:e2e_request_latency_seconds": "e2e",
}
SPAN_KEYS = {
    "ttft": "gen_ai.latency.time_to_first_token",
    "queue": "gen_ai.latency.time_in_queue",
    "prefill": "gen_ai.latency.time_in_model_prefill",
    "decode": "gen_ai.latency.time_in_model_decode",
    "e2e": "gen_ai.latency.e2e",
}


def engine_of(record: RequestRecord) -> str:
    """Every third request to the decode engine, the rest to the mixed one."""
    return "h200-0.decode" if record.sequence % 3 == 0 else "h200-1.mixed"


def added_s(record: RequestRecord) -> float:
    """The client-added TTFT the fixture gives a request: 3 to 7 ms."""
    return 0.003 + 0.001 * (record.sequence % 5)


def server_times(record: RequestRecord) -> dict[str, float]:
    """The engine's own times of a completed record: TTFT less the client-added part, split into
    queue (beyond 0.235 s) and prefill; decode is the record's TPOT over 127 tokens."""
    assert record.ttft_s is not None and record.tpot_s is not None
    ttft = record.ttft_s - added_s(record)
    queue = max(0.0, ttft - 0.235)
    decode = record.tpot_s * 127
    return {"ttft": ttft, "queue": queue, "prefill": ttft - queue, "decode": decode,
            "e2e": ttft + decode}  # fmt: skip


def histogram(values: Sequence[float], bounds: Sequence[float]) -> HistogramDelta:
    """The delta a page shows for ``values``: counts[i] in (bounds[i-1], bounds[i]]."""
    counts = [0] * (len(bounds) + 1)
    for v in values:
        counts[bisect_left(bounds, v)] += 1
    return HistogramDelta(bounds=list(bounds), counts=counts, count=len(values),
                          sum=math.fsum(values))  # fmt: skip


def _reading() -> PageReading:
    return PageReading(ok=True, error=None, wall_time="2026-12-01T10:00:00Z", elapsed_s=0.004)


def _page(name: str, kind: str, role: str | None, times: list[dict[str, float]],
          bounds: Sequence[float], aborted: int) -> ServerPage:  # fmt: skip
    counters = [CounterDelta(name="vllm:request_success_total",
                             labels={"finished_reason": reason}, delta=float(n))
                for reason, n in (("length", len(times)), ("abort", aborted))]  # fmt: skip
    return ServerPage.model_validate({
        "name": name, "kind": kind, "role": role, "url": f"http://127.0.0.1:1/{name}/metrics",
        "before": _reading(), "after": _reading(), "restarted": False,
        "histograms": {
            family: histogram([t[key] for t in times], bounds if family == TTFT else BOUNDS)
            for family, key in FAMILIES.items()
        },
        "counters": counters if kind == "engine" else [], "missing": [],
    })  # fmt: skip


def _span(request_id: str, engine: str, times: dict[str, float], start: int) -> dict[str, Any]:
    attributes: dict[str, Any] = {"gen_ai.request.id": f"cmpl-{request_id}-0"}
    attributes.update({SPAN_KEYS[k]: v for k, v in times.items()})
    return {"name": "llm_request", "engine": engine, "start_ns": start, "attributes": attributes}


def add_server_data(
    folder: Path,
    *,
    spans: bool,
    bounds_of: Callable[[str], Sequence[float]] = lambda name: BOUNDS,
    without_span: int = 2,
) -> None:
    """Give the run folder ``folder`` the server's view of its completed records: ``server.json``
    (two engines, ``ENGINES``, and a router page whose TTFT histogram counts every request once
    more), the summary's ``server``; with ``spans``, every completed record's span but the first
    ``without_span``, one warm-up span and one span of another run."""
    run = read_run(folder)
    done = [r for r in run.records if r.status == "completed"]
    per_engine = {name: [server_times(r) for r in done if engine_of(r) == name]
                  for name in ENGINES}  # fmt: skip
    pages = [_page(name, "engine", role, per_engine[name], bounds_of(name), ABORTED[name])
             for name, role in ENGINES.items()]  # fmt: skip
    pages.append(_page(ROUTER, "router", None, [server_times(r) for r in done], BOUNDS, 0))
    records, span_view, receiver = list(run.records), None, None
    if spans:
        found = [_span(r.request_id, engine_of(r), server_times(r), r.sequence)
                 for r in done[without_span:]]  # fmt: skip
        found.append(
            _span(run.manifest.warmup_request_id, "h200-1.mixed", server_times(done[0]), 0)
        )
        found.append(_span("trial-other-000001", "h200-1.mixed", server_times(done[0]), 0))
        ids = sorted(r.request_id for r in records)
        joined = join(found, ids, run.manifest.warmup_request_id)
        records, span_view = attach(records, joined, ENGINES)
        receiver = ReceiverFacts(address="127.0.0.1:4318", exports=7, rejected=0,
                                 spans=len(found), other_spans=3, waited_s=0.25)  # fmt: skip
        (folder / "requests.jsonl").write_bytes(
            b"".join(orjson.dumps(r.model_dump(mode="json")) + b"\n" for r in records)
        )
    doc = ServerDoc(run_id=run.manifest.run_id, pages=pages, receiver=receiver)
    (folder / "server.json").write_bytes(orjson.dumps(doc.model_dump(mode="json")))
    summary = run.summary.model_copy(update={"server": compare(pages, records, span_view)})
    (folder / "summary.json").write_bytes(
        orjson.dumps(summary.model_dump(mode="json", by_alias=True))
    )


def strip_server_data(folder: Path) -> None:
    """The run folder as a run with --no-server-metrics writes it: no ``server.json``, no summary
    ``server``, no record ``server``."""
    run = read_run(folder)
    (folder / "server.json").unlink()
    (folder / "requests.jsonl").write_bytes(
        b"".join(orjson.dumps(r.model_copy(update={"server": None}).model_dump(mode="json"))
                 + b"\n" for r in run.records)
    )  # fmt: skip
    summary = run.summary.model_copy(update={"server": None})
    (folder / "summary.json").write_bytes(
        orjson.dumps(summary.model_dump(mode="json", by_alias=True))
    )
