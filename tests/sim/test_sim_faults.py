"""Every injected fault shows up as the engine client's typed error."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import fields

import httpx
import pytest

from narwhal_engine_client import (
    EngineClient,
    EngineHTTPError,
    EngineStreamError,
    EngineTimeoutError,
    StreamCutError,
    completion_body,
)
from narwhal_sim import Faults, SimConfigError
from narwhal_sim.testing import SimFleet, sim_config, start_sim_fleet

BODY = completion_body(model="m", prompt=list(range(500, 600)), max_tokens=40)


CLEAR = dict.fromkeys(f.name for f in fields(Faults))  # every fault, so none leaks between tests


@pytest.fixture(scope="module")
def shared_fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimFleet]:
    """One tiny-preset engine with a key, one without (started once for the module)."""
    cfg = sim_config({"preset": "tiny"})
    engines = [
        {"iid": "e0", "role": "mixed", "model": "m"},
        {"iid": "locked", "role": "mixed", "model": "m", "api_key_env": "NARWHAL_SIM_TEST_KEY"},
    ]
    mp = pytest.MonkeyPatch()
    mp.setenv("NARWHAL_SIM_TEST_KEY", "s3cret")
    try:
        with start_sim_fleet(tmp_path_factory.mktemp("faults"), engines, sim_config=cfg) as f:
            yield f
    finally:
        mp.undo()


@pytest.fixture
def fleet(shared_fleet: SimFleet) -> Iterator[SimFleet]:
    """The shared fleet, every fault cleared after the test."""
    yield shared_fleet
    shared_fleet.set_faults("e0", **CLEAR)


async def test_health_503(fleet: SimFleet) -> None:
    """health_status=503 makes /health answer 503; clearing it restores 200."""
    fleet.set_faults("e0", health_status=503)
    async with EngineClient(fleet.urls["e0"]) as client:
        assert await client.health() == 503
        fleet.set_faults("e0", health_status=None)
        assert await client.health() == 200


@pytest.mark.parametrize("status", [429, 500, 503])
async def test_http_error_rate(fleet: SimFleet, status: int) -> None:
    """http_error at rate 1 refuses every completion with that status (EngineHTTPError)."""
    fleet.set_faults("e0", http_error={"status": status, "rate": 1.0})
    async with EngineClient(fleet.urls["e0"]) as client:
        rec = await client.stream_completion(BODY, request_id=f"err-{status}")
    assert isinstance(rec.error, EngineHTTPError) and rec.error.status == status
    assert rec.http_status == status


@pytest.mark.parametrize(
    ("fault", "tokens", "error_type"),
    [
        ("stream_error_after_tokens", 5, EngineStreamError),  # error event, then [DONE]
        ("cut_after_tokens", 7, StreamCutError),  # connection closed without [DONE]
    ],
)
async def test_stream_faults_after_tokens(
    fleet: SimFleet, fault: str, tokens: int, error_type: type[Exception]
) -> None:
    """stream_error_after_tokens / cut_after_tokens end the stream after exactly N tokens."""
    fleet.set_faults("e0", **{fault: tokens})
    async with EngineClient(fleet.urls["e0"]) as client:
        rec = await client.stream_completion(BODY, request_id=f"{fault}-{tokens}")
    assert isinstance(rec.error, error_type)
    assert sum(rec.chunk_tokens) == tokens


async def test_stall_times_out(fleet: SimFleet) -> None:
    """A stalled engine accepts but makes no progress: the client times out; clearing resumes."""
    fleet.set_faults("e0", stall=True)
    async with EngineClient(fleet.urls["e0"]) as client:
        rec = await client.stream_completion(BODY, request_id="stall", timeout_s=0.5)
        assert isinstance(rec.error, EngineTimeoutError)
        state = fleet.state("e0")
        assert state["faults"]["stall"] is True
        fleet.set_faults("e0", stall=False)
        rec = await client.stream_completion(BODY, request_id="after-stall")
    assert rec.ok and rec.completion_tokens == 40


async def test_restart_cuts_in_flight(fleet: SimFleet) -> None:
    """A restart cuts in-flight streams and gives a new process_start_time_seconds."""
    long_body = completion_body(model="m", prompt=list(range(500, 600)), max_tokens=2000)
    async with EngineClient(fleet.urls["e0"]) as client:
        before = (await client.metrics()).process_start_time_seconds
        task = asyncio.create_task(client.stream_completion(long_body, request_id="victim"))
        await asyncio.sleep(0.3)
        new_start = await asyncio.to_thread(fleet.restart, "e0")
        rec = await task
        after = (await client.metrics()).process_start_time_seconds
    assert isinstance(rec.error, StreamCutError)
    assert before is not None and after == new_start and after > before


async def test_max_model_len_faults(fleet: SimFleet) -> None:
    """tokenize_max_model_len / models_max_model_len report a wrong or missing context limit."""
    fleet.set_faults("e0", tokenize_max_model_len=1234, models_max_model_len="missing")
    async with EngineClient(fleet.urls["e0"]) as client:
        assert (await client.models())[0].max_model_len is None
        assert (await client.tokenize("a b", model="m")).max_model_len == 1234
    fleet.set_faults("e0", tokenize_max_model_len="missing")
    async with httpx.AsyncClient() as c:
        doc = (await c.post(fleet.urls["e0"] + "/tokenize", json={"prompt": "a b"})).json()
    assert "max_model_len" not in doc and doc["count"] == 3


async def test_version_and_prefix_caching_overrides(fleet: SimFleet) -> None:
    """version and prefix_caching faults change what the engine reports."""
    fleet.set_faults("e0", version="0.9.9", prefix_caching=True)
    async with EngineClient(fleet.urls["e0"]) as client:
        assert await client.version() == "0.9.9"
        cache = (await client.metrics()).cache_config()
    assert cache is not None and cache["enable_prefix_caching"] == "True"


async def test_bearer_key(fleet: SimFleet) -> None:
    """With api_key_env set, /v1 without the key answers 401 {"error":"Unauthorized"}."""
    async with EngineClient(fleet.urls["locked"]) as client:
        rec = await client.stream_completion(BODY, request_id="nokey")
        assert await client.health() == 200  # not guarded
    assert isinstance(rec.error, EngineHTTPError) and rec.error.status == 401
    async with EngineClient(fleet.urls["locked"], api_key="s3cret") as client:
        rec = await client.stream_completion(BODY, request_id="key")
    assert rec.ok


def test_bad_fault_rejected(fleet: SimFleet) -> None:
    """An unknown fault or a bad value is refused with a message naming it."""
    with pytest.raises(SimConfigError, match="unknown fault"):
        fleet.set_faults("e0", explode=True)
    with pytest.raises(SimConfigError, match=r"http_error\.status"):
        fleet.set_faults("e0", http_error={"status": 418, "rate": 1})


async def _busy_of_one(
    fleet: SimFleet, client: EngineClient, request_id: str, max_tokens: int
) -> float:
    """Simulated seconds e0's device spent on one 100-token request of ``max_tokens`` tokens."""
    before = fleet.state("e0")["device_busy_s"]
    body = completion_body(model="m", prompt=list(range(700, 800)), max_tokens=max_tokens)
    assert (await client.stream_completion(body, request_id=request_id)).ok
    return float(fleet.state("e0")["device_busy_s"]) - before


async def test_noise_spreads_step_times(fleet: SimFleet) -> None:
    """With noise the device's step durations (simulated busy time) vary between requests."""
    async with EngineClient(fleet.urls["e0"]) as client:
        quiet = {round(await _busy_of_one(fleet, client, f"noise-{k}", 1), 9) for k in range(3)}
        fleet.set_faults("e0", noise=0.5)
        noisy = {
            round(await _busy_of_one(fleet, client, f"noise-{10 + k}", 1), 9) for k in range(3)
        }
    assert len(quiet) == 1 and len(noisy) == 3


async def test_decode_drag_slows_the_steps_without_a_prefill_chunk(fleet: SimFleet) -> None:
    """decode_drag_s adds its seconds to each step that decodes without a prefill chunk: a request
    of five tokens (one prefill step, four decode steps) keeps the device busy 4 x 10 ms longer;
    a value outside [0, 1] s is refused, naming the fault."""
    async with EngineClient(fleet.urls["e0"]) as client:
        quiet = await _busy_of_one(fleet, client, "drag-0", 5)
        fleet.set_faults("e0", decode_drag_s=0.01)
        dragged = await _busy_of_one(fleet, client, "drag-1", 5)
    assert dragged - quiet == pytest.approx(4 * 0.01, abs=1e-9)
    with pytest.raises(SimConfigError, match=r"decode_drag_s: expected seconds in \[0, 1\]"):
        fleet.set_faults("e0", decode_drag_s=2)
