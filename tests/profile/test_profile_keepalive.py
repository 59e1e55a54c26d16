"""Real servers close idle connections: the profiler never loses a run to that race, and a point
that fails for a transport reason is measured once more on new connections.

The end-to-end test reproduces what vLLM's server did to ``make conformance``: the first requests
of a 4-stream cohort went out on pooled connections that had sat idle while the 1-stream cohorts
before it ran, and the server had closed them. Here the simulator's ``drop_idle_after_s`` makes
the client lose that race every time.
"""

from __future__ import annotations

import asyncio
import io
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

from narwhal_engine_client import EngineClient, EngineConnectError, StreamRecord
from narwhal_profile_cli._errors import ProfileAbortError
from narwhal_profile_cli._progress import Progress
from narwhal_profile_cli.sweeps._decode import run_decode
from narwhal_profile_cli.sweeps._prefill import run_prefill, warm_up
from narwhal_profile_cli.sweeps._preflight import probe_engine
from narwhal_profile_cli.sweeps._prompts import PromptFactory
from narwhal_profile_cli.sweeps._requests import RequestIds
from narwhal_sim.testing import SimFleet, sim_config, start_sim_fleet
from narwhal_store import EngineEntry

if TYPE_CHECKING:
    from .conftest import Kit

ONE_ENGINE: list[dict[str, Any]] = [{"iid": "e0", "role": "mixed"}]


@pytest.mark.slow
def test_a_sweep_against_an_engine_that_drops_requests_on_idle_connections_completes(
    kit: Kit, sim_factory: Callable[..., SimFleet]
) -> None:
    """Every request arriving on a connection idle for 0.5 s is dropped unanswered: each is
    resent on a new connection, the run completes, and the sidecar names the resent requests."""
    fleet = sim_factory(ONE_ENGINE, sim_config=sim_config({"faults": {"drop_idle_after_s": 0.5}}))
    done = kit.run(
        "--fleet", fleet.fleet_path, *kit.prefill_lens, "--decode-tokens", "640",
        "--decode-input-lens", "512,2048", "--decode-concurrency", "1,4",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    drops = fleet.state("e0")["connections"]["idle_drops"]
    assert drops >= 3  # at least the three idle connections of the first 4-stream cohort
    _, sidecar_path = kit.outputs(fleet)
    entry = kit.load(sidecar_path)["profiles"][0]
    streams = [s for c in entry["decode_samples"] for s in c["streams"]]
    resent = sum(s["resends"] for s in streams)
    resent += sum(len(p["resent_request_ids"]) for p in entry["prefill_samples"])
    assert resent >= 3
    assert all(c["remeasured"] is None for c in entry["decode_samples"])
    four = [c for c in entry["decode_samples"] if c["concurrency"] == 4]
    assert any(s["resends"] == 1 for c in four for s in c["streams"])


@pytest.mark.slow
def test_a_keepalive_expiry_below_the_engines_idle_bound_avoids_the_race(
    kit: Kit, sim_factory: Callable[..., SimFleet]
) -> None:
    """With --keepalive-expiry 0.1 no connection idle for the engine's 0.5 s is ever reused: not
    one request is dropped, none is resent."""
    fleet = sim_factory(ONE_ENGINE, sim_config=sim_config({"faults": {"drop_idle_after_s": 0.5}}))
    done = kit.run(
        "--fleet", fleet.fleet_path, *kit.prefill_lens, "--decode-tokens", "640",
        "--decode-input-lens", "512,2048", "--decode-concurrency", "1,4",
        "--keepalive-expiry", "0.1",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert fleet.state("e0")["connections"]["idle_drops"] == 0
    _, sidecar_path = kit.outputs(fleet)
    entry = kit.load(sidecar_path)["profiles"][0]
    assert all(s["resends"] == 0 for c in entry["decode_samples"] for s in c["streams"])
    assert all(p["resent_request_ids"] == [] for p in entry["prefill_samples"])


class FailsOnce(EngineClient):
    """An engine client whose streams with a tag in ``fail`` (once each) end as if the server had
    closed the connection before answering, without being sent."""

    def __init__(self, url: str, fail: set[str]) -> None:
        super().__init__(url, stream_transport="raw")
        self.fail = set(fail)
        self.dropped_idle = 0

    async def stream_completion(  # type: ignore[override]
        self, body: bytes, *, request_id: str, **kw: Any
    ) -> StreamRecord:
        tag = request_id.split("-")[-2]
        if tag in self.fail:
            self.fail.discard(tag)
            now = time.perf_counter_ns()
            record = StreamRecord(request_id=request_id, send_ns=now, end_ns=now)
            record.error = EngineConnectError("cannot reach the engine: connection reset")
            return record
        return await super().stream_completion(body, request_id=request_id, **kw)

    async def drop_idle_connections(self) -> int:
        self.dropped_idle += 1
        return await super().drop_idle_connections()


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimFleet]:
    with start_sim_fleet(
        tmp_path_factory.mktemp("remeasure"),
        [{"iid": "e0", "role": "mixed", "model": "m"}],
        sim_config=sim_config({"preset": "tiny"}),
        time_scale=4.0,
    ) as sim:
        yield sim


def _entry(fleet: SimFleet) -> EngineEntry:
    return EngineEntry.model_validate({"iid": "e0", "url": fleet.urls["e0"], "role": "mixed"})


async def _sweep(fleet: SimFleet, fail: set[str]) -> tuple[Any, Any, FailsOnce]:
    async with FailsOnce(fleet.urls["e0"], fail) as client:
        probe = await probe_engine(_entry(fleet), client)
        prompts, ids = PromptFactory(probe.pool, 7), RequestIds("t")
        progress = Progress(io.StringIO(), enabled=False)
        await warm_up(probe, prompts, ids, 256)
        prefill = await run_prefill(probe, (256, 512), 2, prompts, ids, progress)
        cohorts = await run_decode(
            probe, (256,), (1, 2), 1, 48, prompts, ids, progress, time.perf_counter_ns
        )
    return prefill, cohorts, client


def test_a_point_that_fails_for_a_transport_reason_is_measured_again(engine: SimFleet) -> None:
    prefill, cohorts, client = asyncio.run(_sweep(engine, {"warmup", "p512", "d256x2"}))
    assert client.dropped_idle == 3  # new connections before each measurement taken again
    by_len = {p.length: p for p in prefill}
    assert len(by_len[512].ttft_s) == 2 and len(by_len[512].remeasured) == 1
    assert "connection reset" in by_len[512].remeasured[0].reason
    assert by_len[256].remeasured == []
    two = next(c for c in cohorts if c.concurrency == 2)
    assert two.remeasured is not None and len(two.remeasured.request_ids) == 1
    assert len(two.streams) == 2 and all(s.chunk_ns for s in two.streams)
    assert {s.request_id for s in two.streams}.isdisjoint(two.remeasured.request_ids)
    one = next(c for c in cohorts if c.concurrency == 1)
    assert one.remeasured is None


def test_a_second_transport_failure_aborts(engine: SimFleet) -> None:
    class FailsTwice(FailsOnce):
        async def stream_completion(  # type: ignore[override]
            self, body: bytes, *, request_id: str, **kw: Any
        ) -> StreamRecord:
            if "-p512-" in request_id:
                self.fail.add("p512")
            return await super().stream_completion(body, request_id=request_id, **kw)

    async def go() -> None:
        async with FailsTwice(engine.urls["e0"], set()) as client:
            probe = await probe_engine(_entry(engine), client)
            prompts, ids = PromptFactory(probe.pool, 7), RequestIds("t")
            progress = Progress(io.StringIO(), enabled=False)
            await run_prefill(probe, (256, 512), 2, prompts, ids, progress)

    with pytest.raises(ProfileAbortError, match=r"request np-t-e0-p512-\d+ failed: cannot reach"):
        asyncio.run(go())
