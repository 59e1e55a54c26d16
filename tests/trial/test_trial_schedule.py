"""Unit tests of the open-loop schedule and the schedule-miss decision, with an injected clock."""

from __future__ import annotations

import pytest

from narwhal_trial import ScheduleLimits, due_offsets_ns, miss_reason, pace, wait_until
from narwhal_trial.documents._records import MissReason

MS = 1_000_000


class FakeClock:
    """A monotonic nanosecond clock that only moves when the fake sleep (or a test) moves it."""

    def __init__(self) -> None:
        self.now = 0
        self.sleeps: list[float] = []

    def __call__(self) -> int:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += max(int(seconds * 1e9), 1000)  # a yield costs 1 us


def test_due_offsets_are_absolute() -> None:
    """Offer n is due at n / rate; the runbook's 0.5/s gives 0, 2, 4 ... seconds."""
    assert due_offsets_ns(4, 0.5) == [0, 2_000_000_000, 4_000_000_000, 6_000_000_000]
    assert due_offsets_ns(3, 3.0)[2] == 666_666_667
    with pytest.raises(ValueError, match="rate"):
        due_offsets_ns(3, 0.0)


def test_miss_reason() -> None:
    """The cap is checked first, then the lag; at exactly the limit an offer is still sent."""
    limits = ScheduleLimits(max_in_flight=64, max_lag_ns=50 * MS)
    assert miss_reason(50 * MS, 0, 63, limits) is None
    assert miss_reason(50 * MS + 1, 0, 0, limits) == "lag"
    assert miss_reason(0, 0, 64, limits) == "in_flight_cap"
    assert miss_reason(60 * MS, 0, 64, limits) == "lag"  # late is lag, whatever the count


async def test_wait_until_sleeps_then_yields() -> None:
    """The pacer sleeps to 1.2 ms before the due time, then only yields until it arrives."""
    clock = FakeClock()
    now = await wait_until(100 * MS, clock, clock.sleep)
    assert now >= 100 * MS
    assert clock.sleeps[0] == pytest.approx(0.0988)
    assert all(s == 0 for s in clock.sleeps[1:])


async def test_pace_offers_every_request_independently_of_completions() -> None:
    """A stuck fleet makes later offers misses at the cap, never delays them."""
    clock = FakeClock()
    limits = ScheduleLimits(max_in_flight=3, max_lag_ns=50 * MS)
    flying = 0
    decided: list[tuple[int, int, MissReason | None]] = []

    def dispatch(n: int, due: int, now: int, miss: MissReason | None, k: int) -> None:
        nonlocal flying
        decided.append((n, now - due, miss))
        if miss is None:
            flying += 1  # nothing ever completes

    count = await pace(
        0,
        due_offsets_ns(6, 10.0),
        clock=clock,
        limits=limits,
        in_flight=lambda: flying,
        dispatch=dispatch,
        sleep=clock.sleep,
    )
    assert count == 6
    assert [m for _, _, m in decided] == [None, None, None] + ["in_flight_cap"] * 3
    assert all(0 <= lag < MS for _, lag, _ in decided)


async def test_pace_marks_late_offers_as_lag_misses() -> None:
    """An offer decided more than max_lag after its due time is a lag miss, not sent late."""
    clock = FakeClock()
    limits = ScheduleLimits(max_in_flight=64, max_lag_ns=50 * MS)
    seen: list[MissReason | None] = []

    def dispatch(n: int, due: int, now: int, miss: MissReason | None, k: int) -> None:
        seen.append(miss)
        if n == 0:
            clock.now += 260 * MS  # the loop was blocked for 260 ms after the first offer

    await pace(
        0,
        due_offsets_ns(5, 10.0),  # due at 0, 100, 200, 300, 400 ms
        clock=clock,
        limits=limits,
        in_flight=lambda: 0,
        dispatch=dispatch,
        sleep=clock.sleep,
    )
    assert seen == [None, "lag", "lag", None, None]


def test_limits_validate() -> None:
    """A cap below one or a negative lag is refused."""
    with pytest.raises(ValueError, match="max_in_flight"):
        ScheduleLimits(0, 0)
    with pytest.raises(ValueError, match="max_lag"):
        ScheduleLimits(1, -1)
