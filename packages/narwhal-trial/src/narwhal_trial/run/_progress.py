"""A once-a-second status line on stderr while a run offers requests (only on a terminal).

It reads counters the run keeps anyway; it never touches the per-request or per-chunk path.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import TextIO

from narwhal_trial._clock import Clock


class RunProgress:
    """Offered, finished and in-flight counts and the schedule time left, rewritten in place."""

    def __init__(
        self,
        stream: TextIO,
        *,
        requests: int,
        rate: float,
        t0_ns: int,
        clock: Clock,
        in_flight: Callable[[], int],
        finished: Callable[[], int],
        interval_s: float = 1.0,
    ) -> None:
        try:
            self.enabled = stream.isatty()
        except (AttributeError, ValueError):
            self.enabled = False
        self._stream = stream
        self._requests = requests
        self._rate = rate
        self._t0 = t0_ns
        self._clock = clock
        self._in_flight = in_flight
        self._finished = finished
        self._interval_s = interval_s
        self._task: asyncio.Task[None] | None = None
        self._width = 0

    def line(self) -> str:
        """The status as it stands now."""
        elapsed_s = max(0.0, (self._clock() - self._t0) / 1e9)
        offered = min(self._requests, int(elapsed_s * self._rate) + 1)
        left_s = max(0.0, (self._requests - 1) / self._rate - elapsed_s)
        return (
            f"offered {offered}/{self._requests} · finished {self._finished()} · "
            f"in flight {self._in_flight()} · schedule ends in {left_s:.0f} s"
        )

    def start(self) -> None:
        """Begin updating (no-op when the stream is not a terminal)."""
        if self.enabled:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        """Stop updating and end the status line."""
        if self._task is None:
            return
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._task = None
        self._stream.write("\n")
        self._stream.flush()

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._interval_s)
            text = self.line()
            pad = max(0, self._width - len(text))
            self._width = len(text)
            self._stream.write("\r" + text + " " * pad)
            self._stream.flush()
