"""The router: forwarding, least-loaded policy, gauges and the request journal."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from narwhal_engine_client import EngineClient, EngineStreamError, StreamCutError, completion_body
from narwhal_sim.testing import SimFleet, sim_config, start_sim_fleet

from .conftest import journal_by_id


@pytest.fixture(scope="module")
def routed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimFleet]:
    """A prefill+decode group and a mixed engine behind the router (tiny preset)."""
    engines = [
        {"iid": "g.prefill", "role": "prefill", "model": "m", "shared_device": {"group": "g"}},
        {"iid": "g.decode", "role": "decode", "model": "m", "shared_device": {"group": "g"}},
        {"iid": "solo", "role": "mixed", "model": "m"},
    ]
    with start_sim_fleet(
        tmp_path_factory.mktemp("router"),
        engines,
        sim_config=sim_config({"preset": "tiny"}),
        router=True,
    ) as fleet:
        yield fleet


async def test_router_forwards_and_journals(routed: SimFleet) -> None:
    """Completions through the router stream unchanged and each gets one journal line."""
    assert routed.router_url is not None
    async with EngineClient(routed.router_url) as client:
        assert await client.health() == 200
        assert (await client.models())[0].id == "m"
        assert (await client.tokenize("a b c", model="m")).count == 3
        bodies = [
            completion_body(model="m", prompt=list(range(300, 400)), max_tokens=20)
            for _ in range(4)
        ]
        records = await asyncio.gather(
            *[client.stream_completion(b, request_id=f"route-{k}") for k, b in enumerate(bodies)]
        )
    assert all(r.ok and r.completion_tokens == 20 for r in records)
    journal = journal_by_id(routed, *(f"route-{k}" for k in range(4)))
    entries = [journal[f"route-{k}"] for k in range(4)]
    assert {e["engine"] for e in entries} == {
        "g.decode",
        "solo",
    }  # least loaded, never the prefill engine
    for e in entries:
        assert e["status"] == "ok" and e["http_status"] == 200
        assert (e["prompt_tokens"], e["completion_tokens"]) == (100, 20)
        assert isinstance(e["arrival"], float) and e["arrival"] <= e["first_token"] <= e["end"]


async def test_router_journals_failures_and_gauges(routed: SimFleet) -> None:
    """A refused request is journaled as an error; the router's gauges read 0 when idle."""
    routed.set_faults("solo", http_error={"status": 503, "rate": 1.0})
    routed.set_faults("g.decode", http_error={"status": 503, "rate": 1.0})
    try:
        async with EngineClient(routed.router_url or "") as client:
            rec = await client.stream_completion(
                completion_body(model="m", prompt=[300] * 10, max_tokens=2), request_id="refused"
            )
            snap = await client.metrics()
    finally:
        routed.set_faults("solo", http_error=None)
        routed.set_faults("g.decode", http_error=None)
    assert rec.http_status == 503
    entry = journal_by_id(routed, "refused")["refused"]
    assert entry["status"] == "error" and entry["http_status"] == 503
    assert snap.value("narwhal_router_admission_queue_depth") == 0.0
    assert snap.value("narwhal_router_resident_requests") == 0.0


@pytest.mark.parametrize(
    ("fault", "status", "error_type"),
    [
        ("cut_after_tokens", "cut", StreamCutError),
        ("stream_error_after_tokens", "stream_error", EngineStreamError),
    ],
)
async def test_router_relays_stream_faults(
    routed: SimFleet, fault: str, status: str, error_type: type[Exception]
) -> None:
    """A cut or errored engine stream reaches the client as such and is journaled by its kind."""
    for iid in ("solo", "g.decode"):
        routed.set_faults(iid, **{fault: 3})
    try:
        async with EngineClient(routed.router_url or "") as client:
            body = completion_body(model="m", prompt=[300] * 10, max_tokens=20)
            rec = await client.stream_completion(body, request_id=f"fault-{status}")
    finally:
        for iid in ("solo", "g.decode"):
            routed.set_faults(iid, **{fault: None})
    assert isinstance(rec.error, error_type)
    entry = journal_by_id(routed, f"fault-{status}")[f"fault-{status}"]
    assert entry["status"] == status and entry["http_status"] == 200
