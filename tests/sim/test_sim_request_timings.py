"""A finished request's phase timings (queue, prefill, decode, inference, time per output token) on
the scheduler's own timeline, and the per-request histograms they feed."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client.parser import text_string_to_metric_families

from narwhal_sim import decode_step_s, get_preset, idle_ttft_s
from narwhal_sim.engine._metrics import EngineStats, render_engine_metrics
from narwhal_sim.model._scheduler import SimRequest
from narwhal_sim.model._timings import RequestTimings, request_timings
from narwhal_sim.testing import TokenStamps, VirtualGpu, run_on_virtual_clock

PRESET = get_preset("h200-llama-3.1-8b").with_overrides(jitter=0.0)
SCALE = 4.0
PROMPT, TOKENS = 1024, 8


async def _two_in_a_row() -> tuple[SimRequest, SimRequest, SimRequest]:
    """Two requests arriving together on an engine of one sequence (the second waits for the
    first), then a one-token request alone; on a device running 4x faster than simulated time."""
    gpu = VirtualGpu(time_scale=SCALE)
    engine = gpu.engine(PRESET, max_num_seqs=1)
    loop = asyncio.get_running_loop()

    def submit(tokens: int) -> SimRequest:
        now = loop.time()
        ready = now + PRESET.api_overhead / SCALE
        request = SimRequest(f"r{now}", PROMPT, tokens, TokenStamps(now), now, ready)
        engine.submit(request)
        return request

    first, second = submit(TOKENS), submit(TOKENS)
    for r in (first, second):
        assert isinstance(r.sink, TokenStamps) and await r.sink.done
    single = submit(1)
    assert isinstance(single.sink, TokenStamps) and await single.sink.done
    await gpu.stop()
    return first, second, single


def test_phases_follow_the_model() -> None:
    """Alone: no queue, prefill = the idle TTFT less the API overhead, decode = the decode
    steps; the waiting request queues exactly until the first one's last token."""
    first, second, single = run_on_virtual_clock(_two_in_a_row())
    a, b = request_timings(first, SCALE), request_timings(second, SCALE)
    steps = sum(decode_step_s(PRESET, 1, PROMPT + k) for k in range(1, TOKENS))
    assert a.queue_s == 0.0
    assert a.ttft_s == pytest.approx(idle_ttft_s(PRESET, PROMPT), rel=1e-9)
    assert a.prefill_s == pytest.approx(idle_ttft_s(PRESET, PROMPT) - PRESET.api_overhead, rel=1e-9)
    assert a.decode_s == pytest.approx(steps, rel=1e-9)
    assert a.tpot_s == pytest.approx(steps / (TOKENS - 1), rel=1e-9)
    assert a.inference_s == pytest.approx(a.prefill_s + a.decode_s, rel=1e-12)
    assert a.e2e_s == pytest.approx(a.ttft_s + a.decode_s, rel=1e-12)
    assert (a.prompt_tokens, a.completion_tokens) == (PROMPT, TOKENS)
    # the second was admitted when the first finished: its queue is the first's e2e less the API
    assert second.scheduled_at == first.last_token_at
    assert b.queue_s == pytest.approx(a.e2e_s - PRESET.api_overhead, rel=1e-9)
    assert b.queue_s > 0 and b.prefill_s == pytest.approx(a.prefill_s, rel=1e-9)
    assert b.ttft_s == pytest.approx(PRESET.api_overhead + b.queue_s + b.prefill_s, rel=1e-9)
    one = request_timings(single, SCALE)
    assert (one.decode_s, one.tpot_s, one.completion_tokens) == (0.0, 0.0, 1)
    assert one.inference_s == one.prefill_s > 0


def test_unfinished_request_has_no_timings() -> None:
    request = SimRequest("x", 10, 5, None, 0.0, 0.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not finished"):
        request_timings(request, 1.0)


NEW_FAMILIES = {
    "vllm:request_queue_time_seconds": "queue_s",
    "vllm:request_prefill_time_seconds": "prefill_s",
    "vllm:request_decode_time_seconds": "decode_s",
    "vllm:request_inference_time_seconds": "inference_s",
    "vllm:request_time_per_output_token_seconds": "tpot_s",
}
REQUEST_LATENCY_BUCKETS = [0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0]
REQUEST_LATENCY_BUCKETS += [50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0]
TPOT_BUCKETS = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0]
TPOT_BUCKETS += [7.5, 10.0, 20.0, 40.0, 80.0]


def test_histograms_render_with_vllm_buckets() -> None:
    """Each finished request adds one observation to each family, in vLLM's buckets."""
    stats = EngineStats()
    observed = [
        RequestTimings(0.2, 1.2, 0.4, 0.05, 0.9, 0.95, 0.1, 100, 10),
        RequestTimings(0.2, 3.0, 2.0, 0.1, 2.7, 2.8, 0.3, 100, 10),
    ]
    for t in observed:
        stats.observe_finished(t)
    text = render_engine_metrics(
        model_name="m",
        engine_index="0",
        running=0,
        waiting=0,
        kv_usage=0.0,
        cache_config={},
        start_time=1.0,
        stats=stats,
    ).decode()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    for name, attr in NEW_FAMILIES.items():
        assert families[name].type == "histogram"
        samples = families[name].samples
        assert all(s.labels["model_name"] == "m" and s.labels["engine"] == "0" for s in samples)
        buckets = {s.labels["le"]: s.value for s in samples if s.name == f"{name}_bucket"}
        bounds = [float(le) for le in buckets if le != "+Inf"]
        assert bounds == (TPOT_BUCKETS if attr == "tpot_s" else REQUEST_LATENCY_BUCKETS)
        values = sorted(getattr(t, attr) for t in observed)
        for le, cumulative in buckets.items():
            assert cumulative == sum(v <= float(le) for v in values), (name, le)
        (count,) = [s.value for s in samples if s.name == f"{name}_count"]
        (total,) = [s.value for s in samples if s.name == f"{name}_sum"]
        assert count == 2
        assert total == pytest.approx(sum(values))
    e2e = families["vllm:e2e_request_latency_seconds"].samples
    assert [s.value for s in e2e if s.name.endswith("_count")] == [2.0]
