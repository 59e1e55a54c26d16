"""The clock and sleep the trial's timing code is handed, so tests can pass virtual ones.

A clock returns monotonic nanoseconds (``time.perf_counter_ns`` in a real run); a sleep waits a
number of seconds (``asyncio.sleep``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

Clock = Callable[[], int]
Sleep = Callable[[float], Awaitable[None]]
