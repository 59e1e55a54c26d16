"""NeighbourLoad against fake engines (httpx.MockTransport): traffic, records and checks."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable

import httpx
import pytest

from narwhal_engine_client import EngineClient
from narwhal_profile_cli._errors import ProfileAbortError, ProfileUsageError
from narwhal_profile_cli.sweeps._neighbours import (
    Neighbour,
    NeighbourLoad,
    NeighbourSettings,
    check_neighbour_fit,
    check_neighbours,
)
from narwhal_store import NeighbourRecord

POOL = list(range(1000, 1100))
SETTINGS = NeighbourSettings(
    prefill_rps=40.0,
    decode_rps=40.0,
    prefill_tokens=16,
    decode_input_tokens=8,
    decode_output_tokens=4,
)

Handler = Callable[[httpx.Request], Awaitable[httpx.Response]]


def _sse(prompt_tokens: int, completion_tokens: int) -> bytes:
    events = [
        {"choices": [{"index": 0, "text": "x", "finish_reason": None, "token_ids": [1]}]}
        for _ in range(completion_tokens)
    ]
    events.append(
        {
            "choices": [],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens},
        }
    )
    lines = [f"data: {json.dumps(e)}\n\n" for e in events] + ["data: [DONE]\n\n"]
    return "".join(lines).encode()


class FakeEngine:
    """Records every completion body and answers per ``mode`` (ok, stall, error)."""

    def __init__(self, mode: str = "ok") -> None:
        self.mode = mode
        self.bodies: list[dict[str, object]] = []
        self.request_ids: list[str] = []
        self.cancelled = 0

    async def handle(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.bodies.append(body)
        self.request_ids.append(request.headers["x-request-id"])
        if self.mode == "stall":
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                self.cancelled += 1
                raise
        if self.mode == "error":
            return httpx.Response(500, json={"error": {"message": "boom", "type": "Internal"}})
        return httpx.Response(
            200,
            content=_sse(len(body["prompt"]), body["max_tokens"]),
            headers={"content-type": "text/event-stream"},
        )


def _neighbour(iid: str, role: str, engine: FakeEngine, max_model_len: int = 64) -> Neighbour:
    client = EngineClient(f"http://{iid}.test", transport=httpx.MockTransport(engine.handle))
    return Neighbour(
        iid=iid,
        role=role,  # type: ignore[arg-type]
        client=client,
        model="m",
        max_model_len=max_model_len,
        pool=POOL,
        counting="token_ids",
    )


async def _run(
    neighbours: list[Neighbour], seed: int = 7, hold_s: float = 0.4
) -> list[NeighbourRecord]:
    async with NeighbourLoad(neighbours, SETTINGS, seed=seed) as load:
        await asyncio.sleep(0.05)
        load.mark()
        await asyncio.sleep(hold_s)
        records = load.records_since_mark()
    for nb in neighbours:
        await nb.client.aclose()
    return records


async def test_healthy_neighbours_complete_requests_by_role() -> None:
    """Prefill and decode neighbours get fresh exact-length prompts with their role's counts."""
    pre, dec = FakeEngine(), FakeEngine()
    records = await _run([_neighbour("p0", "prefill", pre), _neighbour("d0", "mixed", dec)])
    by_iid = {r.iid: r for r in records}
    assert by_iid["p0"].role == "prefill" and by_iid["d0"].role == "mixed"
    for rec in records:
        assert rec.completions >= 2 and rec.errors == []
        assert rec.offered_rps == 40.0
        assert rec.achieved_rps == pytest.approx(rec.completions / rec.interval_s)
        assert set(rec.model_dump()) == {
            "iid",
            "role",
            "offered_rps",
            "completions",
            "achieved_rps",
            "errors",
            "interval_s",
        }
    check_neighbours(records)
    assert all(len(b["prompt"]) == 16 and b["max_tokens"] == 1 for b in pre.bodies)  # type: ignore[arg-type]
    assert all(len(b["prompt"]) == 8 and b["max_tokens"] == 4 for b in dec.bodies)  # type: ignore[arg-type]
    # every neighbour stream asks for exact per-chunk token counts
    assert all(b.get("return_token_ids") is True for b in pre.bodies + dec.bodies)
    prompts = [tuple(b["prompt"]) for b in pre.bodies]  # type: ignore[call-overload]
    assert len(set(prompts)) == len(prompts)
    assert all(t in POOL for p in prompts for t in p)
    ids = pre.request_ids + dec.request_ids
    assert len(set(ids)) == len(ids)


async def test_prompts_are_seeded() -> None:
    """The same seed gives the same first prompt; another seed a different one."""
    first = []
    for seed in (1, 1, 2):
        eng = FakeEngine()
        await _run([_neighbour("p0", "prefill", eng)], seed=seed, hold_s=0.01)
        first.append(eng.bodies[0]["prompt"])
    assert first[0] == first[1] != first[2]


async def test_stalled_neighbour_rejects_profile_and_is_cancelled() -> None:
    """A neighbour that never answers completes nothing, is named, and is cancelled on exit."""
    ok, stalled = FakeEngine(), FakeEngine("stall")
    records = await _run([_neighbour("p0", "prefill", ok), _neighbour("d1", "decode", stalled)])
    rec = {r.iid: r for r in records}["d1"]
    assert rec.completions == 0 and rec.achieved_rps == 0.0
    with pytest.raises(ProfileAbortError, match="neighbour d1") as info:
        check_neighbours(records)
    assert info.value.exit_code == 1 and info.value.engine == "d1"
    assert stalled.cancelled == len(stalled.bodies) >= 2


async def test_failing_neighbour_rejects_profile() -> None:
    """HTTP errors land in the neighbour's record and reject the profile."""
    records = await _run([_neighbour("p9", "prefill", FakeEngine("error"))])
    assert records[0].errors and "500" in records[0].errors[0]
    with pytest.raises(ProfileAbortError, match=r"neighbour p9 .*failed"):
        check_neighbours(records)


async def test_neighbour_fit_is_checked_against_live_limit() -> None:
    """Input plus output beyond a neighbour's live max_model_len is a usage error (exit 2)."""
    eng = FakeEngine()
    fits = _neighbour("d0", "decode", eng, max_model_len=12)
    too_small = _neighbour("d1", "decode", eng, max_model_len=11)
    check_neighbour_fit([fits], SETTINGS)
    with pytest.raises(ProfileUsageError, match="neighbour d1") as info:
        check_neighbour_fit([fits, too_small], SETTINGS)
    assert info.value.exit_code == 2
    await fits.client.aclose()
    await too_small.client.aclose()


def test_settings_reject_non_finite_rates() -> None:
    """Non-finite or non-positive rates and non-positive token counts are usage errors."""
    with pytest.raises(ProfileUsageError, match="prefill-rps"):
        NeighbourSettings(float("nan"), 1.0, 1, 1, 1)
    with pytest.raises(ProfileUsageError, match="decode-output-tokens"):
        NeighbourSettings(1.0, 1.0, 1, 1, 0)
