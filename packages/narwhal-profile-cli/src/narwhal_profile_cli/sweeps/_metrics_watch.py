"""Watch an engine's ``/metrics`` during a decode cohort: waiting requests and KV-cache exhaustion.

A snapshot is read before the cohort, then every ``interval_s`` while it runs, then after it. Each
observation carries the time (same clock as the stream records), so the cohort can judge only what
happened inside its decode window.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Self

from narwhal_engine_client import EngineClient, EngineClientError, MetricsSnapshot

WAITING = "vllm:num_requests_waiting"
RUNNING = "vllm:num_requests_running"
KV_USAGE = "vllm:kv_cache_usage_perc"
PREEMPTIONS = "vllm:num_preemptions"
#: KV-cache usage (a fraction, despite the name) at or above which the cache counts as exhausted.
KV_EXHAUSTED = 0.99
#: The only families a watch parses: a cohort's closing reading is read while the engine idles.
WATCHED = (WAITING, RUNNING, KV_USAGE, PREEMPTIONS)


@dataclass(frozen=True, slots=True)
class Observation:
    """One ``/metrics`` reading: ``t_ns`` when the answer arrived, ``sent_ns`` when it was asked
    for (the engine sampled its gauges in between; None: not known, ``t_ns`` stands for both)."""

    t_ns: int
    waiting: float | None
    running: float | None
    kv_usage: float | None
    preemptions: float | None
    sent_ns: int | None = None

    def within(self, start_ns: int, end_ns: int) -> bool:
        """Certainly sampled inside ``[start_ns, end_ns]``: asked for after the start, answered
        before the end (a reading asked for before the window but read late, on a busy client,
        shows the engine before the window)."""
        asked = self.t_ns if self.sent_ns is None else self.sent_ns
        return start_ns <= asked and self.t_ns <= end_ns


def _max(snapshot: MetricsSnapshot, name: str) -> float | None:
    """The largest sample of a gauge over its label sets (one per data-parallel engine)."""
    family = snapshot.families.get(name)
    if family is None or not family.samples:
        return None
    return max(sample.value for sample in family.samples)


def observe(snapshot: MetricsSnapshot, t_ns: int, sent_ns: int | None = None) -> Observation:
    """The gauges this module cares about, from one snapshot (counts summed, usage maximal)."""
    return Observation(
        t_ns=t_ns,
        waiting=snapshot.sum(WAITING),
        running=snapshot.sum(RUNNING),
        kv_usage=_max(snapshot, KV_USAGE),
        preemptions=_counter(snapshot, PREEMPTIONS),
        sent_ns=sent_ns,
    )


def _counter(snapshot: MetricsSnapshot, name: str) -> float | None:
    """A counter by its ``_total`` sample name, whatever family the page's ``# TYPE`` line made."""
    total = snapshot.sum(name + "_total")
    return total if total is not None else snapshot.sum(name)


@dataclass(slots=True)
class MetricsWatch:
    """Async context manager polling ``/metrics`` of one engine while a cohort runs.

    Seeded with ``observations=[previous.last()]``, it reuses the reading that closed the previous
    cohort of the same engine as its opening one (nothing ran on the engine in between), so no
    ``/metrics`` round trip delays the cohort's start.
    """

    client: EngineClient
    clock_ns: Callable[[], int]
    interval_s: float = 0.1
    observations: list[Observation] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    _task: asyncio.Task[None] | None = None

    async def _read(self) -> None:
        sent = self.clock_ns()
        try:
            snapshot = await self.client.metrics(names=WATCHED)
        except EngineClientError as exc:
            self.errors.append(str(exc))
            return
        self.observations.append(observe(snapshot, self.clock_ns(), sent))

    async def _poll(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            await self._read()

    async def __aenter__(self) -> Self:
        if not self.observations:  # else seeded with the previous cohort's closing reading
            await self._read()
        self._task = asyncio.create_task(self._poll())
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                # the poller's own cancellation ends here; one aimed at us (Ctrl-C) goes on
                current = asyncio.current_task()
                if current is not None and current.cancelling():
                    raise
        if exc_type is None:
            await self._read()

    def problems(self, start_ns: int, end_ns: int) -> list[str]:
        """What invalidates a cohort whose decode window is ``[start_ns, end_ns]``.

        Waiting requests or a full KV cache seen inside the window, or any preemption between the
        first and the last reading.
        """
        found: list[str] = []
        inside = [o for o in self.observations if o.within(start_ns, end_ns)]
        waiting = max((o.waiting or 0.0 for o in inside), default=0.0)
        if waiting > 0:
            found.append(
                f"the engine's metrics show {waiting:g} waiting request(s) during the cohort"
            )
        usage = max((o.kv_usage or 0.0 for o in inside), default=0.0)
        if usage >= KV_EXHAUSTED:
            found.append(
                f"the engine's KV cache was exhausted during the cohort (usage {usage:.0%})"
            )
        counts = [o.preemptions for o in self.observations if o.preemptions is not None]
        if counts and counts[-1] > counts[0]:
            found.append(
                f"the engine preempted {counts[-1] - counts[0]:g} request(s) during the cohort "
                "(KV cache exhausted)"
            )
        return found

    def last(self) -> list[Observation]:
        """The closing reading, to seed the next watch with (empty after a failed read)."""
        return self.observations[-1:] if not self.errors else []

    def max_waiting(self) -> float:
        """The most waiting requests seen at any reading."""
        return max((o.waiting or 0.0 for o in self.observations), default=0.0)
