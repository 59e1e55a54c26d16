"""A small task that measures event-loop lag: how late a short sleep wakes up."""

from __future__ import annotations

import asyncio

from narwhal_trial._clock import Clock

INTERVAL_S = 0.01


class LoopLagMonitor:
    """Sleeps ``interval_s`` repeatedly and records each wake-up's lateness, in seconds."""

    def __init__(self, clock: Clock, interval_s: float = INTERVAL_S) -> None:
        self._clock = clock
        self._interval_s = interval_s
        self.samples: list[float] = []
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start measuring on the running loop."""
        self._task = asyncio.get_running_loop().create_task(self._run(), name="loop-lag-monitor")

    async def stop(self) -> None:
        """Stop measuring; the samples stay."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def _run(self) -> None:
        interval_ns = int(self._interval_s * 1e9)
        while True:
            before = self._clock()
            await asyncio.sleep(self._interval_s)
            self.samples.append(max(0, self._clock() - before - interval_ns) / 1e9)
