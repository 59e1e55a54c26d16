"""Engines with ``otlp_traces_endpoint`` serve vLLM's per-request histograms and export one
``llm_request`` span per finished request, with the same numbers; export failures never touch
serving."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from narwhal_engine_client import EngineClient, MetricsSnapshot, completion_body
from narwhal_sim.testing import SimFleet, free_port, sim_config, start_sim_fleet

from . import _otlp_kit as kit

ENGINES = ["traced", "dropper", "rejected", "refused", "plain"]
PHASES = {  # histogram -> span attribute
    "vllm:time_to_first_token_seconds": "gen_ai.latency.time_to_first_token",
    "vllm:e2e_request_latency_seconds": "gen_ai.latency.e2e",
    "vllm:request_queue_time_seconds": "gen_ai.latency.time_in_queue",
    "vllm:request_prefill_time_seconds": "gen_ai.latency.time_in_model_prefill",
    "vllm:request_decode_time_seconds": "gen_ai.latency.time_in_model_decode",
    "vllm:request_inference_time_seconds": "gen_ai.latency.time_in_model_inference",
}
TPOT = "vllm:request_time_per_output_token_seconds"
DECODE = "gen_ai.latency.time_in_model_decode"
TEMPERATURE = "gen_ai.request.temperature"
SCOPE = "vllm.llm_engine"
# a step's tokens are committed up to 0.5 ms before the step's end, the time the span is stamped
SLACK_NS = 10_000_000
ATTRIBUTES = {
    *PHASES.values(),
    "gen_ai.usage.prompt_tokens",
    "gen_ai.usage.completion_tokens",
    "gen_ai.request.id",
    "gen_ai.request.max_tokens",
    "gen_ai.request.n",
    "gen_ai.request.top_p",
    "gen_ai.request.temperature",
}


@pytest.fixture(scope="module")
def receiver() -> Iterator[kit.TraceReceiver]:
    """Answers 500 on the ``rejected`` engine's path, 200 elsewhere."""
    with kit.TraceReceiver(lambda path: 500 if path.endswith("/rejected") else 200) as r:
        yield r


@pytest.fixture(scope="module")
def fleet(
    tmp_path_factory: pytest.TempPathFactory, receiver: kit.TraceReceiver
) -> Iterator[SimFleet]:
    """Every engine exports to its own path of the receiver (``{iid}``), except ``refused``
    (nothing listens) and ``plain`` (no export); ``traced`` runs two sequences at most."""
    cfg = sim_config(
        {
            "preset": "tiny",
            "otlp_traces_endpoint": receiver.url("/v1/traces/{iid}"),
            "otlp_export_interval_s": 0.05,
        },
        traced={"max_num_seqs": 2},
        refused={"otlp_traces_endpoint": f"http://127.0.0.1:{free_port()}/v1/traces"},
        plain={"otlp_traces_endpoint": None},
    )
    engines = [{"iid": iid, "role": "mixed", "model": "m"} for iid in ENGINES]
    with start_sim_fleet(tmp_path_factory.mktemp("spans"), engines, sim_config=cfg) as sim:
        yield sim


def _body(prompt_len: int, tokens: int, **extra: Any) -> bytes:
    return completion_body(
        model="m",
        prompt=list(range(300, 300 + prompt_len)),
        max_tokens=tokens,
        temperature=extra.pop("temperature", 0.0),
        extra=extra,
    )


def _wait_state(
    fleet: SimFleet, iid: str, done: Callable[[dict[str, Any]], bool]
) -> dict[str, Any]:
    """The engine's ``/_sim/state`` once ``done(state)`` holds (exports are periodic), <= 30 s."""
    deadline = time.monotonic() + 30.0
    while True:
        state = fleet.state(iid)
        if done(state) or time.monotonic() > deadline:
            return state
        time.sleep(0.02)


def _wait_otlp(fleet: SimFleet, iid: str, done: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    """The engine's ``otlp`` state once ``done(otlp)`` holds."""
    return dict(_wait_state(fleet, iid, lambda st: done(st["otlp"]))["otlp"])


def _check_span(s: kit.Span, prompt_len: int, tokens: int, temperature: float) -> None:
    """One request's span: vLLM's name, kind, scope, resource and attributes, consistent
    latencies (a stalled engine: every request queued)."""
    assert (s.name, s.kind, s.scope, s.parent_span_id) == ("llm_request", 2, SCOPE, b"")
    assert s.resource == {"service.name": SCOPE, "service.instance.id": "traced"}
    assert len(s.trace_id) == 16 and len(s.span_id) == 8
    a = s.attributes
    # vLLM leaves temperature out when it is 0 (greedy): `if req_state.temperature:`
    assert set(a) == (ATTRIBUTES if temperature else ATTRIBUTES - {TEMPERATURE})
    assert (a["gen_ai.usage.prompt_tokens"], a["gen_ai.request.max_tokens"]) == (prompt_len, tokens)
    assert (a["gen_ai.usage.completion_tokens"], a["gen_ai.request.n"]) == (tokens, 1)
    assert a["gen_ai.request.top_p"] == 0.9 and a.get(TEMPERATURE, 0.0) == temperature
    lat: dict[str, float] = {}
    for name in PHASES.values():
        value = a[name]
        assert isinstance(value, float), name  # a double, not an int
        lat[name.rsplit(".", 1)[1]] = value
    ttft, e2e, queue = lat["time_to_first_token"], lat["e2e"], lat["time_in_queue"]
    prefill, decode = lat["time_in_model_prefill"], lat["time_in_model_decode"]
    assert queue > 0 and prefill > 0 and queue + prefill <= ttft <= e2e
    assert lat["time_in_model_inference"] == pytest.approx(prefill + decode, rel=1e-9, abs=1e-12)
    assert e2e == pytest.approx(ttft + decode, rel=1e-9)
    assert (decode == 0.0) == (tokens == 1)
    # time scale 1: the wall-clock span lasts the e2e
    duration_s = (s.end_time_unix_nano - s.start_time_unix_nano) / 1e9
    assert duration_s == pytest.approx(e2e, abs=1e-6)


def _delta(before: MetricsSnapshot, after: MetricsSnapshot, sample: str) -> float:
    return (after.sum(sample) or 0.0) - (before.sum(sample) or 0.0)


async def test_spans_carry_what_the_histograms_observed(
    fleet: SimFleet, receiver: kit.TraceReceiver
) -> None:
    """Six requests queued behind a stall on a two-sequence engine: six spans, one per request,
    with vLLM's attributes, and latencies summing exactly to the histograms' increments."""
    url = fleet.urls["traced"]
    shapes = [(100, 12, 0.7), (400, 30, 0.0), (50, 1, 1.0), (800, 20, 0.3), (10, 2, 0.0)]
    shapes.append((200, 25, 1.5))
    async with EngineClient(url) as client:
        before = await client.metrics()
        fleet.set_faults("traced", stall=True)  # every request waits: a queue time for each
        wall_start = time.time_ns()
        tasks = [
            asyncio.create_task(
                client.stream_completion(
                    _body(n, k, temperature=temp, top_p=0.9), request_id=f"span-{i}"
                )
            )
            for i, (n, k, temp) in enumerate(shapes)
        ]
        queued = await asyncio.to_thread(
            _wait_state, fleet, "traced", lambda st: st["waiting"] >= len(shapes)
        )
        assert queued["waiting"] == len(shapes) and queued["running"] == 0
        await asyncio.to_thread(fleet.set_faults, "traced", stall=None)
        records = await asyncio.gather(*tasks)
        wall_end = time.time_ns()
        assert all(r.ok and r.error is None for r in records)
        spans = await asyncio.to_thread(
            receiver.wait_spans, lambda got: len(got) >= len(shapes), "/v1/traces/traced"
        )
        after = await client.metrics()
    assert len(spans) == len(shapes)
    by_id = {s.attributes["gen_ai.request.id"]: s for s in spans}
    assert set(by_id) == {f"cmpl-span-{i}-0" for i in range(len(shapes))}
    for i, (n, k, temp) in enumerate(shapes):
        span = by_id[f"cmpl-span-{i}-0"]
        _check_span(span, n, k, temp)
        assert wall_start <= span.start_time_unix_nano  # arrival and end on the wall clock
        assert span.start_time_unix_nano <= span.end_time_unix_nano <= wall_end + SLACK_NS
    assert len({s.trace_id for s in spans}) == len({s.span_id for s in spans}) == len(spans)
    for family, attr in PHASES.items():
        assert _delta(before, after, f"{family}_count") == len(shapes)
        assert _delta(before, after, f"{family}_sum") == pytest.approx(
            math.fsum(float(s.attributes[attr]) for s in spans), rel=1e-9
        ), family
        for suffix in ("_bucket", "_count", "_sum"):
            assert after.value(family + suffix) is not None
    decode = {i: float(by_id[f"cmpl-span-{i}-0"].attributes[DECODE]) for i in range(len(shapes))}
    tpots = [decode[i] / (k - 1) if k > 1 else 0.0 for i, (_, k, _) in enumerate(shapes)]
    assert _delta(before, after, f"{TPOT}_count") == len(shapes)
    assert _delta(before, after, f"{TPOT}_sum") == pytest.approx(math.fsum(tpots), rel=1e-9)
    posts = [p for p in receiver.received() if p.path == "/v1/traces/traced"]
    assert posts and all(p.content_type == "application/x-protobuf" for p in posts)
    otlp = _wait_otlp(fleet, "traced", lambda o: o["exported_spans"] == len(shapes))
    assert (otlp["exported_spans"], otlp["failed_exports"], otlp["dropped_spans"]) == (6, 0, 0)


async def test_span_drop_every_leaves_every_second_request_untraced(
    fleet: SimFleet, receiver: kit.TraceReceiver
) -> None:
    """span_drop_every 2: of six requests in a row, the 2nd, 4th and 6th export no span (the
    histograms still count all six)."""
    fleet.set_faults("dropper", span_drop_every=2)
    async with EngineClient(fleet.urls["dropper"]) as client:
        for i in range(6):
            rec = await client.stream_completion(_body(20, 3), request_id=f"drop-{i}")
            assert rec.ok
        snapshot = await client.metrics()
    otlp = _wait_otlp(fleet, "dropper", lambda o: o["exported_spans"] + o["skipped_spans"] >= 6)
    assert (otlp["exported_spans"], otlp["skipped_spans"], otlp["queued_spans"]) == (3, 3, 0)
    ids = {s.attributes["gen_ai.request.id"] for s in receiver.spans("/v1/traces/dropper")}
    assert ids == {"cmpl-drop-0-0", "cmpl-drop-2-0", "cmpl-drop-4-0"}
    assert snapshot.value("vllm:request_queue_time_seconds_count") == 6
    assert fleet.set_faults("dropper", span_drop_every=None)["span_drop_every"] is None


@pytest.mark.parametrize(
    ("iid", "error"), [("refused", "cannot connect"), ("rejected", "HTTP 500")]
)
async def test_export_failures_do_not_touch_serving(
    fleet: SimFleet, receiver: kit.TraceReceiver, iid: str, error: str
) -> None:
    """Nothing listening, or a collector answering 500: every request is served, the failed
    exports are counted and their spans dropped, not retried."""
    async with EngineClient(fleet.urls[iid]) as client:
        records = [
            await client.stream_completion(_body(30, 5), request_id=f"{iid}-{i}") for i in range(3)
        ]
        snapshot = await client.metrics()
    assert all(r.ok and r.completion_tokens == 5 for r in records)
    assert snapshot.value("vllm:request_prefill_time_seconds_count") == 3
    otlp = _wait_otlp(fleet, iid, lambda o: o["dropped_spans"] >= 3)
    assert otlp["failed_exports"] >= 1 and otlp["dropped_spans"] == 3
    assert (otlp["exported_spans"], otlp["queued_spans"]) == (0, 0)
    assert error in otlp["last_error"]
    if iid == "rejected":  # the collector did get the spans, once each
        got = receiver.spans(f"/v1/traces/{iid}")
        assert sorted(s.attributes["gen_ai.request.id"] for s in got) == [
            f"cmpl-{iid}-{i}-0" for i in range(3)
        ]


async def test_an_engine_without_endpoint_exports_nothing(fleet: SimFleet) -> None:
    async with EngineClient(fleet.urls["plain"]) as client:
        assert (await client.stream_completion(_body(30, 4), request_id="plain-0")).ok
        snapshot = await client.metrics()
    assert snapshot.value("vllm:request_decode_time_seconds_count") == 1
    otlp = fleet.state("plain")["otlp"]
    assert otlp["endpoint"] is None and otlp["exported_spans"] == otlp["skipped_spans"] == 0
    assert fleet.state("traced")["otlp"]["endpoint"].endswith("/v1/traces/traced")


async def test_queued_spans_are_flushed_at_stop(tmp_path: Path) -> None:
    """With a minute between exports, the spans still reach the collector when the engine stops."""
    with kit.TraceReceiver() as receiver:
        cfg = sim_config(
            {"preset": "tiny", "otlp_traces_endpoint": receiver.url(), "otlp_export_interval_s": 60}
        )
        engines = [{"iid": "e0", "role": "mixed", "model": "m"}]
        with start_sim_fleet(tmp_path, engines, sim_config=cfg) as sim:
            async with EngineClient(sim.urls["e0"]) as client:
                for i in range(2):
                    assert (await client.stream_completion(_body(10, 2), request_id=f"f{i}")).ok
        ids = sorted(s.attributes["gen_ai.request.id"] for s in receiver.spans("/v1/traces"))
    assert ids == ["cmpl-f0-0", "cmpl-f1-0"]
