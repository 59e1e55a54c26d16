"""The client's open-loop pacing: absolute due times, the pacer, and the schedule-miss decision.

Offer n is due at ``t0 + n / rate`` on the monotonic clock, whatever happened to earlier offers. The
pacer sleeps until just before the due time and yields to the event loop for the last ``spin``
nanoseconds, so timer rounding cannot make it late. At the due time an offer is a **schedule miss**
(recorded, never sent) when ``max_in_flight`` requests are already in flight, or when it can no
longer be sent within ``max_lag``. The lag is judged once more where it matters, on the send stamp
taken as the request's head would start onto the wire (``EngineClient.stream_completion(...,
send_by_ns=due + max_lag)``): an offer that got that far too late is a miss too, never a late send.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from narwhal_trial._clock import Clock, Sleep
from narwhal_trial.documents._records import MissReason

SPIN_NS = 1_200_000
"""The pacer stops sleeping this long before a due time and yields until it arrives. asyncio's
timers wake through ``epoll_wait``, whose timeout has 1 ms granularity (rounded up), so a sleep can
end up to about 1 ms late; 1.2 ms covers that. A longer spin costs CPU for nothing: 2 ms doubled
the client's CPU per request at 500 req/s (2.34 → 1.24 ms) with the same send-lag p99 (0.3-0.7 ms),
and 0.5 ms doubled the lag p99 (``bench/bench_clients.py --rows r50,r500 --clients narwhal``)."""


@dataclass(frozen=True, slots=True)
class ScheduleLimits:
    """The client's limits: concurrent requests, and how late an offer may still be sent."""

    max_in_flight: int
    max_lag_ns: int

    def __post_init__(self) -> None:
        if self.max_in_flight < 1:
            raise ValueError(f"max_in_flight must be at least 1, got {self.max_in_flight}")
        if self.max_lag_ns < 0:
            raise ValueError(f"max_lag must not be negative, got {self.max_lag_ns} ns")


def miss_reason(
    now_ns: int, due_ns: int, in_flight: int, limits: ScheduleLimits
) -> MissReason | None:
    """Why an offer due at ``due_ns``, decided at ``now_ns``, may not be sent; None: send.

    An offer decided too late is ``lag`` whatever the in-flight count: the client missed its
    schedule, and the cap may not be blamed for it."""
    if now_ns - due_ns > limits.max_lag_ns:
        return "lag"
    if in_flight >= limits.max_in_flight:
        return "in_flight_cap"
    return None


async def wait_until(
    due_ns: int, clock: Clock, sleep: Sleep = asyncio.sleep, spin_ns: int = SPIN_NS
) -> int:
    """The clock reading at or after ``due_ns``: sleep most of the way, then yield until due."""
    while True:
        now = clock()
        remaining = due_ns - now
        if remaining <= 0:
            return now
        if remaining > spin_ns:
            await sleep((remaining - spin_ns) / 1e9)
        else:
            await sleep(0)


Dispatch = Callable[[int, int, int, MissReason | None, int], None]
"""``dispatch(sequence, due_ns, decided_ns, miss_reason, in_flight)``: send the offer or record its
miss."""


async def pace(
    t0_ns: int,
    offsets_ns: list[int],
    *,
    clock: Clock,
    limits: ScheduleLimits,
    in_flight: Callable[[], int],
    dispatch: Dispatch,
    sleep: Sleep = asyncio.sleep,
) -> int:
    """Decide every offer at its due time and hand it to ``dispatch``; returns the number decided.

    The pacer never waits for a response: ``dispatch`` must start the request without awaiting it.
    """
    decided = 0
    for n, offset in enumerate(offsets_ns):
        due = t0_ns + offset
        now = await wait_until(due, clock, sleep)
        flying = in_flight()
        dispatch(n, due, now, miss_reason(now, due, flying, limits), flying)
        decided += 1
    return decided
