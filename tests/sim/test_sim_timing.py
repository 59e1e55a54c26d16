"""Timing fidelity: idle TTFT and decode TPOT follow the model; KV waits; neighbours slow."""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from narwhal_engine_client import EngineClient, StreamRecord, completion_body
from narwhal_sim import get_preset, idle_ttft_s, tpot_s
from narwhal_sim.testing import SimFleet, sim_config, start_sim_fleet

PRESET = get_preset("h200-llama-3.1-8b")


@pytest.fixture(scope="module")
def h200(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimFleet]:
    """One default-preset engine in real time without jitter (the model is deterministic)."""
    cfg = sim_config({"jitter": 0.0})
    with start_sim_fleet(
        tmp_path_factory.mktemp("h200"),
        [{"iid": "gpu", "role": "mixed", "model": "m"}],
        sim_config=cfg,
    ) as fleet:
        yield fleet


def _prompt(n: int, salt: int) -> list[int]:
    return [300 + (i * 7 + salt) % 30000 for i in range(n)]


def _cohort_tpot(records: list[StreamRecord]) -> float:
    """Median over streams of the mean token interval inside the all-decoding window."""
    start = max(r.chunk_ns[0] for r in records)
    end = min(r.chunk_ns[-1] for r in records)
    per_stream = []
    for r in records:
        inside = [t for t in r.chunk_ns if start <= t <= end]
        assert len(inside) >= 3
        per_stream.append((inside[-1] - inside[0]) / (len(inside) - 1) / 1e9)
    return statistics.median(per_stream)


@pytest.mark.parametrize("length", [1024, 8192, 16384])
async def test_idle_ttft_matches_model(h200: SimFleet, length: int) -> None:
    """Client TTFT on an idle engine is within 5% of idle_ttft_s(L) (incl. the 2-chunk 16k case).

    The best of a few repeats is compared: the model is deterministic here (no jitter) and a busy
    test machine only ever adds delay. The loopback HTTP round trip (best ``GET /version``) is the
    transport's share, not the engine's, and is added to the model.
    """
    async with EngineClient(h200.urls["gpu"]) as client:
        rtts = []
        for _ in range(10):
            t0 = time.perf_counter()
            await client.version()
            rtts.append(time.perf_counter() - t0)
        await client.stream_completion(
            completion_body(model="m", prompt=[400] * 8, max_tokens=1), request_id="w"
        )
        ttfts = []
        for k in range({1024: 10, 8192: 4}.get(length, 3)):
            body = completion_body(model="m", prompt=_prompt(length, k), max_tokens=1)
            rec = await client.stream_completion(body, request_id=f"ttft-{length}-{k}")
            assert rec.ok and rec.prompt_tokens == length and rec.ttft_s is not None
            ttfts.append(rec.ttft_s)
    expected = idle_ttft_s(PRESET, length) + min(rtts)
    assert min(ttfts) == pytest.approx(expected, rel=0.05)


@pytest.mark.parametrize("streams", [1, 16, 48])
async def test_decode_tpot_matches_model(h200: SimFleet, streams: int) -> None:
    """Cohort TPOT of n streams started together is within 5% of tpot_s(n, mean ctx)."""
    prompt_len, tokens = 2048, 64
    async with EngineClient(h200.urls["gpu"], max_connections=64) as client:
        bodies = [
            completion_body(model="m", prompt=_prompt(prompt_len, k), max_tokens=tokens)
            for k in range(streams)
        ]
        records = await asyncio.gather(
            *[
                client.stream_completion(b, request_id=f"tpot-{streams}-{k}")
                for k, b in enumerate(bodies)
            ]
        )
    assert all(r.ok and r.completion_tokens == tokens for r in records)
    expected = tpot_s(PRESET, streams, prompt_len + tokens / 2)
    assert _cohort_tpot(list(records)) == pytest.approx(expected, rel=0.05)


async def test_kv_budget_makes_requests_wait(tmp_path: Path) -> None:
    """With the KV budget exhausted, new requests wait and vllm:num_requests_waiting shows them."""
    cfg = sim_config({"preset": "tiny", "kv_cache_tokens": 4096, "max_model_len": 4096})
    with start_sim_fleet(
        tmp_path, [{"iid": "small", "role": "mixed", "model": "m"}], sim_config=cfg
    ) as fleet:
        async with EngineClient(fleet.urls["small"]) as client:
            bodies = [
                completion_body(model="m", prompt=_prompt(1500, k), max_tokens=400)
                for k in range(3)
            ]
            tasks = [
                asyncio.create_task(client.stream_completion(b, request_id=f"kv-{k}"))
                for k, b in enumerate(bodies)
            ]
            waiting = running = 0.0
            for _ in range(100):
                await asyncio.sleep(0.02)
                snap = await client.metrics()
                waiting = snap.value("vllm:num_requests_waiting") or 0.0
                running = snap.value("vllm:num_requests_running") or 0.0
                if waiting >= 1:
                    break
            records = await asyncio.gather(*tasks)
    assert (waiting, running) == (1.0, 2.0)
    assert all(r.ok for r in records)


async def test_busy_neighbour_raises_tpot(tmp_path: Path) -> None:
    """A decode engine's TPOT rises while its shared-device prefill neighbour is busy."""
    cfg = sim_config({"jitter": 0.0})
    engines = [
        {"iid": "g.decode", "role": "decode", "model": "m", "shared_device": {"group": "g"}},
        {"iid": "g.prefill", "role": "prefill", "model": "m", "shared_device": {"group": "g"}},
    ]
    with start_sim_fleet(tmp_path, engines, sim_config=cfg, time_scale=2.0) as fleet:
        async with (
            EngineClient(fleet.urls["g.decode"]) as target,
            EngineClient(fleet.urls["g.prefill"]) as nb,
        ):

            async def cohort(tag: str) -> float:
                bodies = [
                    completion_body(model="m", prompt=_prompt(1024, k), max_tokens=48)
                    for k in range(4)
                ]
                recs = await asyncio.gather(
                    *[
                        target.stream_completion(b, request_id=f"{tag}-{k}")
                        for k, b in enumerate(bodies)
                    ]
                )
                return _cohort_tpot(list(recs))

            alone = await cohort("alone")
            stop = asyncio.Event()
            done: list[StreamRecord] = []
            flowing = asyncio.Event()

            async def neighbour(lane: int) -> None:
                k = 0
                while not stop.is_set():
                    body = completion_body(model="m", prompt=_prompt(2048, k), max_tokens=1)
                    done.append(await nb.stream_completion(body, request_id=f"nb-{lane}-{k}"))
                    flowing.set()
                    k += 1

            load = asyncio.gather(neighbour(0), neighbour(1))  # two lanes keep the neighbour busy
            await flowing.wait()  # the neighbour's client is warm and its prefills are flowing
            busy = await cohort("busy")
            stop.set()
            await load
    assert all(r.ok for r in done)
    assert busy > 3 * alone
