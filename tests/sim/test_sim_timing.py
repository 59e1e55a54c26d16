"""Timing laws: idle TTFT and decode TPOT follow the model; KV waits; neighbours slow.

The laws are checked on the scheduler's own timeline (the code every HTTP engine runs) on a
virtual clock, so a busy machine cannot bend them and they hold exactly. Over HTTP the tests only
check what load cannot break: an engine is never faster than its model, and a full KV budget makes
requests wait (streams long enough to overlap by design, then cancelled).
"""

from __future__ import annotations

import asyncio
import statistics
from pathlib import Path

import pytest

from narwhal_engine_client import EngineClient, completion_body
from narwhal_sim import Preset, get_preset, idle_ttft_s, tpot_s
from narwhal_sim.testing import (
    TokenStamps,
    VirtualGpu,
    run_on_virtual_clock,
    sim_config,
    start_sim_fleet,
)

PRESET = get_preset("h200-llama-3.1-8b").with_overrides(jitter=0.0)


def _cohort_tpot(streams: list[TokenStamps]) -> float:
    """Median over streams of the mean token interval inside the all-decoding window."""
    start = max(s.tokens[0] for s in streams)
    end = min(s.tokens[-1] for s in streams)
    per_stream = []
    for s in streams:
        inside = [t for t in s.tokens if start <= t <= end]
        assert len(inside) >= 3
        per_stream.append((inside[-1] - inside[0]) / (len(inside) - 1))
    return statistics.median(per_stream)


async def _alone(
    preset: Preset, prompt_len: int, tokens: int, *, scale: float = 1.0, slowdown: float = 1.0
) -> TokenStamps:
    gpu = VirtualGpu(time_scale=scale, slowdown=slowdown)
    stamps = gpu.submit(gpu.engine(preset), prompt_len, tokens)
    assert await stamps.done
    await gpu.stop()
    return stamps


async def _cohort(n: int, prompt_len: int, tokens: int) -> list[TokenStamps]:
    gpu = VirtualGpu()
    engine = gpu.engine(PRESET)
    streams = [gpu.submit(engine, prompt_len, tokens) for _ in range(n)]
    assert all(await asyncio.gather(*(s.done for s in streams)))
    await gpu.stop()
    return streams


@pytest.mark.parametrize("length", [1024, 8192, 16384, 20000])
def test_idle_ttft_is_the_model(length: int) -> None:
    """An idle engine's TTFT is idle_ttft_s(L) (16k and 20k take two prefill chunks)."""
    stamps = run_on_virtual_clock(_alone(PRESET, length, 1))
    assert stamps.ttft == pytest.approx(idle_ttft_s(PRESET, length), rel=1e-9)
    assert len(stamps.tokens) == 1


@pytest.mark.parametrize("scale", [0.5, 10.0])
def test_time_scale_divides_every_duration(scale: float) -> None:
    """--time-scale X makes the TTFT and every token interval X times shorter."""
    base = run_on_virtual_clock(_alone(PRESET, 4096, 16))
    fast = run_on_virtual_clock(_alone(PRESET, 4096, 16, scale=scale))
    assert fast.ttft * scale == pytest.approx(base.ttft, rel=1e-9)
    gaps = [b - a for a, b in zip(base.tokens, base.tokens[1:], strict=False)]
    fast_gaps = [b - a for a, b in zip(fast.tokens, fast.tokens[1:], strict=False)]
    assert [g * scale for g in fast_gaps] == pytest.approx(gaps, rel=1e-9)


@pytest.mark.parametrize(("slowdown", "scale"), [(1.2, 1.0), (1.2, 4.0), (0.8, 1.0)])
def test_slowdown_multiplies_every_duration(slowdown: float, scale: float) -> None:
    """--slowdown X makes the TTFT (API overhead included) and every token interval X times
    longer, at any time scale: the whole engine X times slower than its preset."""
    base = run_on_virtual_clock(_alone(PRESET, 16384, 16, scale=scale))
    slow = run_on_virtual_clock(_alone(PRESET, 16384, 16, scale=scale, slowdown=slowdown))
    assert slow.ttft == pytest.approx(base.ttft * slowdown, rel=1e-9)
    assert slow.ttft * scale == pytest.approx(idle_ttft_s(PRESET, 16384) * slowdown, rel=1e-9)
    gaps = [b - a for a, b in zip(base.tokens, base.tokens[1:], strict=False)]
    slow_gaps = [b - a for a, b in zip(slow.tokens, slow.tokens[1:], strict=False)]
    assert slow_gaps == pytest.approx([g * slowdown for g in gaps], rel=1e-9)


@pytest.mark.parametrize("streams", [1, 16, 48])
def test_decode_tpot_matches_model(streams: int) -> None:
    """Cohort TPOT of n streams started together is tpot_s(n, mean ctx) (0.1%: ctx is a mean)."""
    prompt_len, tokens = 2048, 64
    records = run_on_virtual_clock(_cohort(streams, prompt_len, tokens))
    assert all(len(r.tokens) == tokens for r in records)
    expected = tpot_s(PRESET, streams, prompt_len + tokens / 2)
    assert _cohort_tpot(records) == pytest.approx(expected, rel=1e-3)


def test_kv_budget_makes_requests_wait_on_the_timeline() -> None:
    """Two of three requests fit the KV budget; the third starts only when one has finished."""
    tiny = get_preset("tiny")

    async def scenario() -> tuple[int, int, list[TokenStamps]]:
        gpu = VirtualGpu()
        engine = gpu.engine(tiny, kv_cache_tokens=4096)
        streams = [gpu.submit(engine, 1500, 400) for _ in range(3)]
        await asyncio.sleep(0.1)
        counts = (len(engine.waiting), len(engine.running))
        assert all(await asyncio.gather(*(s.done for s in streams)))
        await gpu.stop()
        return (*counts, streams)

    waiting, running, (a, b, c) = run_on_virtual_clock(scenario())
    assert (waiting, running) == (1, 2)
    assert c.tokens[0] > min(a.tokens[-1], b.tokens[-1])
    assert max(a.tokens[0], b.tokens[0]) < min(a.tokens[-1], b.tokens[-1])


def test_busy_neighbour_raises_tpot() -> None:
    """A decode engine's TPOT rises while its shared-device prefill neighbour is busy."""

    async def scenario() -> tuple[float, float]:
        gpu = VirtualGpu()
        target, neighbour = gpu.engine(PRESET), gpu.engine(PRESET)

        async def cohort() -> float:
            streams = [gpu.submit(target, 1024, 48) for _ in range(4)]
            assert all(await asyncio.gather(*(s.done for s in streams)))
            return _cohort_tpot(streams)

        alone = await cohort()
        stop = asyncio.Event()

        async def lane() -> None:
            while not stop.is_set():
                assert await gpu.submit(neighbour, 2048, 1).done

        load = asyncio.gather(lane(), lane())
        busy = await cohort()
        stop.set()
        await load
        await gpu.stop()
        return alone, busy

    alone, busy = run_on_virtual_clock(scenario())
    assert busy > 3 * alone


async def test_http_engine_is_never_faster_than_its_model(tmp_path: Path) -> None:
    """Over HTTP load only adds delay: client TTFT ≥ the model (less the 0.5 ms wake bias)."""
    with start_sim_fleet(
        tmp_path,
        [{"iid": "gpu", "role": "mixed", "model": "m"}],
        sim_config=sim_config({"jitter": 0.0}),
        time_scale=2.0,
    ) as fleet:
        async with EngineClient(fleet.urls["gpu"]) as client:
            for length in (1024, 16384):
                body = completion_body(
                    model="m", prompt=[300 + i % 900 for i in range(length)], max_tokens=1
                )
                rec = await client.stream_completion(body, request_id=f"floor-{length}")
                assert rec.ok and rec.ttft_s is not None
                assert rec.ttft_s >= idle_ttft_s(PRESET, length) / 2.0 - 0.0006


async def test_kv_budget_shows_waiting_requests_in_metrics(tmp_path: Path) -> None:
    """With the KV budget exhausted, vllm:num_requests_waiting shows the request that waits.

    At time scale 0.05 each 400-token stream lasts 16 s, so the three overlap by design however
    slowly the machine starts them; the streams are cancelled once the gauges have been read. A
    request also counts as waiting during its API overhead (~40 ms here), so the gauges are read
    again half a second after all three arrived and two run: the third still waits, for KV.
    """
    cfg = sim_config({"preset": "tiny", "kv_cache_tokens": 4096, "max_model_len": 4096})
    with start_sim_fleet(
        tmp_path,
        [{"iid": "small", "role": "mixed", "model": "m"}],
        sim_config=cfg,
        time_scale=0.05,
    ) as fleet:
        async with EngineClient(fleet.urls["small"]) as client:
            tasks = [
                asyncio.create_task(
                    client.stream_completion(
                        completion_body(model="m", prompt=[300 + k] * 1500, max_tokens=400),
                        request_id=f"kv-{k}",
                    )
                )
                for k in range(3)
            ]
            waiting = running = most_running = 0.0
            for _ in range(600):  # a bound on the loop, not a timed assertion
                await asyncio.sleep(0.05)
                snap = await client.metrics()
                waiting = snap.value("vllm:num_requests_waiting") or 0.0
                running = snap.value("vllm:num_requests_running") or 0.0
                most_running = max(most_running, running)
                if running >= 2 and waiting + running >= 3:
                    break
            await asyncio.sleep(0.5)
            snap = await client.metrics()
            waiting = snap.value("vllm:num_requests_waiting") or 0.0
            running = snap.value("vllm:num_requests_running") or 0.0
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    assert (waiting, running) == (1.0, 2.0)
    assert most_running == 2.0
