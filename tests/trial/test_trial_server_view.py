"""The server view's arithmetic: page deltas from real-shaped pages, quantile intervals, the
fleet's composition (split fleets), the graded gap, and the span join's id forms."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson
import pytest

from narwhal_engine_client import MetricsSnapshot
from narwhal_trial import HistogramDelta, RequestRecord
from narwhal_trial.documents._server import PageReading
from narwhal_trial.server._compare import compare, grade, merge, quantile_interval
from narwhal_trial.server._pages import MetricsTarget, Reading, page_delta
from narwhal_trial.server._spans import attach, join, wait_for_spans

OK = PageReading(ok=True, error=None, wall_time="2026-12-02T00:00:00.000+00:00", elapsed_s=0.01)


def _page(ttft: list[int], ttft_sum: float, done: int, *, start: float = 100.0,
          e2e: tuple[list[int], float] | None = None, itl_old: bool = False) -> str:  # fmt: skip
    """A vLLM 0.32-shaped page: TTFT buckets 0.1/0.5/1.0, one engine label set split over two
    model labels (the deltas sum them), counters typed without _total, _created series."""
    lines = [
        "# HELP process_start_time_seconds Start time.",
        "# TYPE process_start_time_seconds gauge",
        f"process_start_time_seconds {start}",
        "# HELP vllm:request_success Count of successfully processed requests.",
        "# TYPE vllm:request_success counter",
        f'vllm:request_success_total{{engine="0",finished_reason="length",model_name="m"}} {done}',
        'vllm:request_success_total{engine="0",finished_reason="abort",model_name="m"} 1',
        'vllm:request_success_created{engine="0",finished_reason="length",model_name="m"} 5',
        "# HELP vllm:time_to_first_token_seconds TTFT.",
        "# TYPE vllm:time_to_first_token_seconds histogram",
    ]
    running = 0
    for bound, count in zip(("0.1", "0.5", "1.0", "+Inf"), ttft, strict=True):
        running += count
        half = running // 2
        name = "vllm:time_to_first_token_seconds_bucket"
        lines.append(f'{name}{{engine="0",le="{bound}",model_name="a"}} {half}')
        lines.append(f'{name}{{engine="0",le="{bound}",model_name="b"}} {running - half}')
    lines += [
        f'vllm:time_to_first_token_seconds_count{{engine="0",model_name="a"}} {running // 2}',
        f'vllm:time_to_first_token_seconds_count{{engine="0",model_name="b"}} {running - running // 2}',  # noqa: E501 - one sample line
        f'vllm:time_to_first_token_seconds_sum{{engine="0",model_name="a"}} {ttft_sum}',
        'vllm:time_to_first_token_seconds_sum{engine="0",model_name="b"} 0.0',
        'vllm:time_to_first_token_seconds_created{engine="0",model_name="a"} 5',
    ]
    if e2e is not None:
        counts, total = e2e
        lines.append("# TYPE vllm:e2e_request_latency_seconds histogram")
        running = 0
        for bound, count in zip(("0.1", "0.5", "1.0", "+Inf"), counts, strict=True):
            running += count
            lines.append(f'vllm:e2e_request_latency_seconds_bucket{{le="{bound}"}} {running}')
        lines.append(f"vllm:e2e_request_latency_seconds_count {running}")
        lines.append(f"vllm:e2e_request_latency_seconds_sum {total}")
    if itl_old:
        lines += ["# TYPE vllm:time_per_output_token_seconds histogram",
                  'vllm:time_per_output_token_seconds_bucket{le="+Inf"} 0',
                  "vllm:time_per_output_token_seconds_count 0",
                  "vllm:time_per_output_token_seconds_sum 0"]  # fmt: skip
    return "\n".join(lines) + "\n"


def _reading(text: str) -> Reading:
    return Reading(OK, MetricsSnapshot.from_text(text))


def test_page_delta_sums_label_sets_and_subtracts_the_first_reading() -> None:
    target = MetricsTarget("e0", "engine", "http://127.0.0.1:1", "mixed")
    page = page_delta(
        target,
        _reading(_page([1, 1, 0, 0], 0.3, 4)),
        _reading(_page([3, 5, 1, 1], 4.3, 14, itl_old=True)),
        "http://127.0.0.1:1/metrics",
    )
    h = page.histograms["vllm:time_to_first_token_seconds"]
    assert (h.bounds, h.counts, h.count) == ([0.1, 0.5, 1.0], [2, 4, 1, 1], 8)
    assert h.sum == pytest.approx(4.0)
    success = {c.labels["finished_reason"]: c.delta for c in page.counters}
    assert success == {"length": 10.0, "abort": 0.0}  # _created series are not counters
    assert page.restarted is False
    # the old ITL name stands in for the new one; the request-time families are missing
    assert "vllm:inter_token_latency_seconds" not in page.missing
    assert "vllm:request_queue_time_seconds" in page.missing
    assert "vllm:e2e_request_latency_seconds" in page.missing


def test_restarted_engine_has_no_deltas() -> None:
    target = MetricsTarget("e0", "engine", "http://127.0.0.1:1", "mixed")
    page = page_delta(target, _reading(_page([1, 0, 0, 0], 0.1, 1)),
                      _reading(_page([1, 0, 0, 0], 0.1, 1, start=200.0)), "u")  # fmt: skip
    assert page.restarted is True and page.histograms == {} and page.counters == []
    view = compare([page], [])
    assert view.engines[0].read is False and view.fleet.server_completed is None
    assert any("restarted during the run" in w for w in view.warnings)


@pytest.mark.parametrize(
    ("counts", "q", "expected"),
    [
        ([2, 4, 1, 1], 0.5, (0.1, 0.5)),  # rank 4 of 8 lies in the second bucket
        ([2, 4, 1, 1], 0.25, (0.0, 0.1)),  # rank 2: the first bucket, from 0
        ([2, 4, 1, 1], 0.99, (1.0, None)),  # rank 8: above the last finite bound
        ([0, 0, 5, 0], 0.5, (0.5, 1.0)),
    ],
)
def test_quantile_interval_is_the_bucket_holding_the_rank(
    counts: list[int], q: float, expected: tuple[float, float | None]
) -> None:
    h = HistogramDelta(bounds=[0.1, 0.5, 1.0], counts=counts, count=sum(counts), sum=1.0)
    found = quantile_interval(h, q)
    assert found is not None and (found.low, found.high) == expected


def test_merge_needs_equal_bounds() -> None:
    a = HistogramDelta(bounds=[0.1, 1.0], counts=[1, 2, 0], count=3, sum=1.5)
    b = HistogramDelta(bounds=[0.1, 1.0], counts=[0, 1, 1], count=2, sum=3.0)
    merged = merge([a, b])
    assert merged is not None and (merged.counts, merged.count, merged.sum) == ([1, 3, 1], 5, 4.5)
    assert merge([a, HistogramDelta(bounds=[0.2, 1.0], counts=[0, 0, 0], count=0, sum=0)]) is None


@pytest.mark.parametrize(
    ("fraction", "expected"),
    [(0.0, "negligible"), (0.0199, "negligible"), (0.02, "normal"), (0.10, "normal"),
     (0.1001, "elevated"), (-0.5, "elevated")],
)  # fmt: skip
def test_grades(fraction: float, expected: str) -> None:
    assert grade(fraction) == expected


def _record(n: int, ttft: float, status: str = "completed") -> RequestRecord:
    return RequestRecord.model_validate({
        "sequence": n, "request_id": f"trial-x-{n:06d}", "due_s": n, "sent": True, "sent_s": n,
        "lag_s": 0.0, "end_s": n + 1.0, "in_flight": 0, "status": status, "miss_reason": None,
        "http_status": 200, "error": None, "ttft_s": ttft, "tpot_s": 0.01, "e2e_s": 1.0,
        "prompt_tokens": 8, "completion_tokens": 4, "chunks": 4, "finish_reason": "length",
        "bytes_sent": 1, "bytes_received": 1, "good": True,
    })  # fmt: skip


def test_split_fleet_adds_the_prefill_engines_e2e_to_the_serving_ttft() -> None:
    """Two requests split (prefill e2e 0.2 s each, decode TTFT 0.05 s each) and two whole ones on
    a mixed engine (TTFT 0.3 s each): the fleet's mean server TTFT is (0.4 + 0.1 + 0.6) / 4."""
    before = _reading(_page([0, 0, 0, 0], 0, 0, e2e=([0, 0, 0, 0], 0.0)))
    after = _reading(_page([2, 0, 0, 0], 0.1, 2, e2e=([0, 2, 0, 0], 0.4)))
    prefill = page_delta(MetricsTarget("p", "engine", "u", "prefill"), before, after, "u")
    decode = page_delta(MetricsTarget("d", "engine", "u", "decode"),
                        _reading(_page([0, 0, 0, 0], 0, 0)), _reading(_page([2, 0, 0, 0], 0.1, 2)),
                        "u")  # fmt: skip
    mixed = page_delta(MetricsTarget("m", "engine", "u", "mixed"),
                       _reading(_page([0, 0, 0, 0], 0, 0)), _reading(_page([0, 2, 0, 0], 0.6, 2)),
                       "u")  # fmt: skip
    records = [_record(n, t) for n, t in enumerate((0.3, 0.3, 0.35, 0.35))]
    view = compare([prefill, decode, mixed], records)
    fleet = view.fleet
    assert (fleet.server_completed, fleet.prefill_completed, fleet.client_completed) == (4, 2, 4)
    assert fleet.ttft_method == "prefill e2e + serving ttft"
    assert fleet.ttft is not None
    assert fleet.ttft.server_mean_s == pytest.approx(1.1 / 4)
    assert fleet.ttft.added_mean_s == pytest.approx(0.325 - 0.275)
    assert fleet.ttft.server_p50_s is None  # quantiles of a sum need spans
    assert fleet.ttft.grade == "elevated"
    shares = {e.name: e.share for e in view.engines}
    assert shares == {"p": None, "d": 0.5, "m": 0.5}
    assert view.warnings == []


def test_count_mismatch_is_a_warning_naming_both_counts() -> None:
    engine = page_delta(MetricsTarget("e0", "engine", "u", "mixed"),
                        _reading(_page([0, 0, 0, 0], 0, 0)), _reading(_page([3, 0, 0, 0], 0.1, 3)),
                        "u")  # fmt: skip
    view = compare([engine], [_record(0, 0.05), _record(1, 0.05)])
    assert view.warnings == [
        "the serving engines finished 3 requests during the run, the client recorded 2 completed"
    ]


def _span(rid: str, engine: str | None, ttft: float, e2e: float, start: int,
          queue: float = 0.01) -> dict[str, Any]:  # fmt: skip
    return {"engine": engine, "start_ns": start, "attributes": {
        "gen_ai.request.id": rid, "gen_ai.latency.time_to_first_token": ttft,
        "gen_ai.latency.e2e": e2e, "gen_ai.latency.time_in_queue": queue,
        "gen_ai.latency.time_in_model_prefill": ttft - queue,
        "gen_ai.latency.time_in_model_decode": e2e - ttft}}  # fmt: skip


def test_join_matches_every_id_form_and_counts_the_rest() -> None:
    ids = [f"trial-x-{n:06d}" for n in range(4)]
    spans = [
        _span("cmpl-trial-x-000000-0", "e0", 0.1, 1.0, 1),  # vLLM 0.32's form
        _span("trial-x-000001", "e0", 0.1, 1.0, 2),  # the id as sent
        _span("cmpl-trial-x-000002-0-8f3a", "e0", 0.1, 1.0, 3),  # a suffix after a dash
        _span("cmpl-trial-x-warmup-0", "e0", 0.1, 1.0, 4),
        _span("cmpl-trial-x-0000033-0", "e0", 0.1, 1.0, 5),  # not a run id: longer digits
        _span("cmpl-other-run-000003-0", "e0", 0.1, 1.0, 6),
    ]
    joined = join(spans, ids, "trial-x-warmup")
    assert sorted(joined.by_id) == ids[:3]
    assert joined.warmup == 1
    assert joined.foreign == ["trial-x-0000033-0", "other-run-000003-0"]
    records = [_record(n, 0.12) for n in range(4)]
    out, view = attach(records, joined, {"e0": "mixed"})
    assert (view.client_completed, view.matched, view.client_only) == (4, 3, 1)
    assert view.client_only_ids == ["trial-x-000003"] and view.server_only == 2
    assert out[0].server is not None and out[0].server.client_added_ttft_s == pytest.approx(0.02)
    assert out[3].server is None and view.by_engine == {"e0": 3}
    assert view.added_ttft_s["p50"] == pytest.approx(0.02) and view.negative == 0


@pytest.mark.parametrize("roles", [{"p": "prefill", "d": "decode"}, {}])
def test_split_request_ttft_is_prefill_e2e_plus_serving_ttft(roles: dict[str, str]) -> None:
    """By the fleet's roles, or without roles by start order (the last span is the serving one)."""
    spans = [_span("cmpl-trial-x-000000-0", "d", 0.03, 0.5, 20),
             _span("cmpl-trial-x-000000-0", "p", 0.2, 0.21, 10)]  # fmt: skip
    out, view = attach([_record(0, 0.25)], join(spans, ["trial-x-000000"], "w"), roles)
    timing = out[0].server
    assert timing is not None and (timing.engine, timing.prefill_engine, timing.spans) == (
        "d",
        "p",
        2,
    )
    assert timing.ttft_s == pytest.approx(0.24)
    assert timing.client_added_ttft_s == pytest.approx(0.01)
    assert timing.queue_s == pytest.approx(0.02) and timing.e2e_s == pytest.approx(0.71)
    assert view.by_engine == {"d": 1}


def test_client_faster_than_server_is_counted_negative() -> None:
    out, view = attach([_record(0, 0.05)],
                       join([_span("trial-x-000000", None, 0.06, 1.0, 1)], ["trial-x-000000"], "w"),
                       {})  # fmt: skip
    assert view.negative == 1 and out[0].server is not None and out[0].server.engine is None
    assert view.by_engine == {"unknown": 1}


def _write_spans(path: Path, spans: list[dict[str, Any]]) -> None:
    path.write_bytes(b"".join(orjson.dumps(s) + b"\n" for s in spans))


@pytest.mark.parametrize("roles", [{"p": "prefill", "d": "decode"}, {}])
def test_wait_needs_the_serving_span_not_the_prefill_half(
    tmp_path: Path, roles: dict[str, str | None]
) -> None:
    """A split request whose prefill span came first is not done: the wait goes on to its bound;
    once the serving span is there it ends at once. Without roles the serving span is the one
    with the request's output tokens."""
    path = tmp_path / "spans.jsonl"
    prefill = _span("cmpl-trial-x-000000-0", "p", 0.2, 0.2, 1)
    prefill["attributes"]["gen_ai.usage.completion_tokens"] = 1
    decode = _span("cmpl-trial-x-000000-0", "d", 0.03, 0.5, 2)
    decode["attributes"]["gen_ai.usage.completion_tokens"] = 4
    _write_spans(path, [prefill])
    wanted = {"trial-x-000000"}
    waited = asyncio.run(wait_for_spans(path, wanted, "w", 0.3, roles=roles, output_tokens=4))
    assert waited >= 0.3
    _write_spans(path, [prefill, decode])
    waited = asyncio.run(wait_for_spans(path, wanted, "w", 30.0, roles=roles, output_tokens=4))
    assert waited < 30.0
