"""Server-side stamps of an engine's own work, so a client can be judged by the engine.

The engine is busy while it holds at least one completion request (from its arrival to the end of
its response); the rest is time the engine waited for its client. Stamps are event-loop seconds
(real time, one clock for every engine of the process).
"""

from __future__ import annotations

from collections import deque
from typing import Any

_GAPS_KEPT = 10_000


class Activity:
    """Busy time, first and last completion, and the idle gaps between busy spans."""

    def __init__(self) -> None:
        self.held = 0
        self.busy_s = 0.0
        self.first_s: float | None = None
        self.last_s: float | None = None
        self._since = 0.0
        self._idle_from: float | None = None
        self.gaps: deque[tuple[float, float]] = deque(maxlen=_GAPS_KEPT)

    def begin(self, now: float) -> None:
        """A completion request arrived."""
        if self.held == 0:
            if self._idle_from is not None:
                self.gaps.append((self._idle_from, max(0.0, now - self._idle_from)))
            self._since = now
        if self.first_s is None:
            self.first_s = now
        self.held += 1

    def end(self, now: float) -> None:
        """A completion request ended (completed, cut or refused)."""
        self.held -= 1
        self.last_s = now
        if self.held == 0:
            self.busy_s += now - self._since
            self._idle_from = now

    def summary(self, now: float) -> dict[str, Any]:
        """For ``GET /_sim/state``."""
        ongoing = now - self._since if self.held else 0.0
        return {
            "engine_busy_s": self.busy_s + ongoing,
            "completions_first_s": self.first_s,
            "completions_last_s": self.last_s,
            "idle_gap_max_s": max((d for _, d in self.gaps), default=None),
        }

    def gap_list(self) -> list[list[float]]:
        """``[[start_s, duration_s], ...]`` of the idle gaps between busy spans (latest 10,000)."""
        return [[start, duration] for start, duration in self.gaps]
