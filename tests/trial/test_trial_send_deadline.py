"""An offer the pacer dispatched on time but that could not reach the wire within ``--max-lag`` is a
``client_schedule_miss``, never a late send (docs/design.md §9: an offer "not sent within 50 ms of
its due time ... is not sent").

The run is in-process so the engine client's connection step can be slowed for chosen offers: the
pacer decides them on time, then the head would start 200 ms late.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest

from narwhal_engine_client._transports.raw import RawStreamPool
from narwhal_sim.testing import SimFleet
from narwhal_trial import RunSettings, run_trial

from .conftest import journal_ids, read_run, wait_for

pytestmark = pytest.mark.slow

STALL_S = 0.2


def _stall_before_the_wire(
    monkeypatch: pytest.MonkeyPatch, transport: str, stalls: Callable[[str], bool]
) -> None:
    """Offers whose request id ``stalls`` wait STALL_S after the pacer released them."""
    current: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="")
    if transport == "raw":  # stall while waiting for a connection, after the pacer let it go
        stream, acquire = RawStreamPool.stream, RawStreamPool._acquire

        async def named_stream(self: RawStreamPool, content: bytes, **kw: Any) -> Any:
            current.set(kw["request_id"])  # each offer runs in its own task and context
            return await stream(self, content, **kw)

        async def slow_acquire(self: RawStreamPool) -> Any:
            if stalls(current.get()):
                await asyncio.sleep(STALL_S)
            return await acquire(self)

        monkeypatch.setattr(RawStreamPool, "stream", named_stream)
        monkeypatch.setattr(RawStreamPool, "_acquire", slow_acquire)
    else:  # stall inside httpx, before httpcore writes the head (where the trace hook checks)
        handle = httpx.AsyncHTTPTransport.handle_async_request

        async def slow_handle(self: httpx.AsyncHTTPTransport, request: httpx.Request) -> Any:
            if stalls(request.headers.get("x-request-id", "")):
                await asyncio.sleep(STALL_S)
            return await handle(self, request)

        monkeypatch.setattr(httpx.AsyncHTTPTransport, "handle_async_request", slow_handle)


def _offer_number(request_id: str) -> int | None:
    """Offers are <run id>-<6-digit sequence>; the warm-up is not an offer."""
    tail = request_id.rpartition("-")[2]
    return int(tail) if tail.isdigit() else None


def _settings(fleet: SimFleet, workload: Path, out: Path, transport: str, **kw: Any) -> RunSettings:
    return RunSettings(
        base_url=str(fleet.router_url),
        workload_path=workload,
        rate=20.0,
        requests=10,
        ttft_s=Decimal(2),
        tpot_s=Decimal("0.0333"),
        attainment=Decimal("0.5"),
        out=out,
        max_lag_s=0.05,
        transport=transport,  # type: ignore[arg-type]
        **kw,
    )


@pytest.mark.parametrize("transport", ["raw", "httpx"])
def test_offers_stalled_before_the_wire_are_misses_not_late_sends(
    shared_fleet: SimFleet,
    tiny_workload: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    transport: str,
) -> None:
    """Offers 1, 3, 5, 7 and 9 stall 200 ms on their way to the wire: each is recorded as a lag
    miss, unsent, and never reaches the router; every sent offer left within the lag limit."""

    def stalls(request_id: str) -> bool:
        n = _offer_number(request_id)
        return n is not None and n % 2 == 1

    _stall_before_the_wire(monkeypatch, transport, stalls)
    before = set(journal_ids(shared_fleet))
    out = tmp_path / "run"
    summary = run_trial(_settings(shared_fleet, tiny_workload, out, transport))
    _, records, doc = read_run(out)
    by_seq = {r["sequence"]: r for r in records}
    assert sorted(by_seq) == list(range(10))
    stalled_offers = [1, 3, 5, 7, 9]
    for n in stalled_offers:
        rec = by_seq[n]
        assert rec["status"] == "client_schedule_miss" and rec["miss_reason"] == "lag", rec
        # uvloop's timers count whole milliseconds: a sleep may end up to 1 ms early
        assert not rec["sent"] and rec["bytes_sent"] == 0 and rec["lag_s"] >= STALL_S - 0.002
        assert "beyond the lag limit" in rec["error"]
    sent = [r for r in records if r["sent"]]
    assert sent and all(r["lag_s"] <= 0.05 for r in sent)
    assert not summary.client_schedule_valid and not doc["client_schedule_valid"]
    assert doc["schedule_misses"]["lag"] >= len(stalled_offers)
    assert summary.exit_code == 2
    assert 1 <= doc["max_in_flight"] <= len(sent)  # refused offers were never in flight
    wait_for(lambda: len(set(journal_ids(shared_fleet)) - before) >= len(sent) + 1, what="journal")
    reached = set(journal_ids(shared_fleet)) - before
    assert {by_seq[n]["request_id"] for n in stalled_offers}.isdisjoint(reached)
    assert {r["request_id"] for r in sent} <= reached


@pytest.mark.parametrize("transport", ["raw", "httpx"])
def test_offers_refused_for_lag_are_never_in_flight_nor_cap_misses(
    shared_fleet: SimFleet,
    tiny_workload: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    transport: str,
) -> None:
    """Every offer stalls 200 ms before the wire (4 times the lag limit, 4 offer intervals): none is
    written, so none is ever in flight, and with --max-in-flight 2 none is blamed on the cap.

    (Counting dispatched offers as in flight, the stalled ones reached 4 and offers from the third
    on were recorded as in_flight_cap misses, although their real fault was lag.)"""
    _stall_before_the_wire(monkeypatch, transport, lambda rid: _offer_number(rid) is not None)
    before = set(journal_ids(shared_fleet))
    out = tmp_path / "run"
    summary = run_trial(_settings(shared_fleet, tiny_workload, out, transport, max_in_flight=2))
    _, records, doc = read_run(out)
    assert sorted(r["sequence"] for r in records) == list(range(10))
    for rec in records:
        assert rec["status"] == "client_schedule_miss" and rec["miss_reason"] == "lag", rec
        assert not rec["sent"] and rec["in_flight"] <= 1
    assert doc["sent"] == 0 and doc["max_in_flight"] == 0
    assert doc["schedule_misses"] == {"in_flight_cap": 0, "lag": 10}
    assert summary.exit_code == 2 and not summary.client_schedule_valid
    wait_for(lambda: len(set(journal_ids(shared_fleet)) - before) >= 1, what="warm-up in journal")
    reached = set(journal_ids(shared_fleet)) - before
    assert not {r["request_id"] for r in records} & reached
