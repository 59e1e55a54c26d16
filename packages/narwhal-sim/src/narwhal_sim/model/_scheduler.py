"""Continuous batching on simulated GPUs.

Each engine keeps a FCFS waiting queue and a running batch. A ``Device`` (one per
``shared_device.group``) runs the step loop: every engine on it plans a step (admission under
``max_num_seqs`` and the KV budget, then its work for the step), the costs of the engines' plans
add up, the device sleeps until the step's end on an absolute timeline, and then every plan
commits (tokens are emitted).

How an engine mixes prefill and decode in a step is its ``mode`` (the sim config's ``scheduler``):

- ``shared`` (default, vLLM's chunked prefill): one decode token per decoding sequence plus
  prefill chunks up to ``max_num_batched_tokens`` (decode tokens use the budget first), costing
  ``decode_step_s(n, Σctx) + Σ prefill_chunk_s``: one fixed cost ``d0`` for both kinds of work.
- ``turns``: a step is either a prefill step (chunks only, within the whole budget, costing
  ``decode_step_s(0, 0) + Σ prefill_chunk_s``, i.e. ``d0`` plus the chunks; no token for the
  decoding sequences) or a decode step (one token per decoding sequence, costing
  ``decode_step_s(n, Σctx)``; no chunks). With both kinds of work waiting the steps strictly
  alternate (a decode step after a prefill step, a prefill step after a decode step); with one
  kind only, every step is of that kind. So every prefill chunk costs the decoding sequences a
  whole extra step's fixed cost ``d0`` compared with ``shared`` (the chunk's own cost they pay
  in both modes). Engines on one device each pick their own step kind; the device still adds
  their plans' costs.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, Protocol

from narwhal_sim.model._presets import Preset, decode_step_s, prefill_chunk_s

_RESYNC_S = 0.05  # fall this far behind the timeline and the device restarts it from "now"
# epoll rounds timeouts up to whole milliseconds, so sleeps end ~0.5 ms late on average: aim early
_WAKE_BIAS_S = 0.0005

SchedulerMode = Literal["shared", "turns"]
SCHEDULER_MODES: tuple[SchedulerMode, ...] = ("shared", "turns")
StepKind = Literal["shared", "prefill", "decode"]


class TokenSink(Protocol):
    """Receives a request's progress (called on the event loop, synchronously)."""

    def on_tokens(self, request: SimRequest, count: int, finished: bool) -> None: ...

    def on_abort(self, request: SimRequest) -> None: ...


@dataclass(slots=True, eq=False)
class SimRequest:
    """One sequence in the scheduler."""

    rid: str
    prompt_len: int
    target_tokens: int  # tokens this request will generate (max_tokens, or its EOS point)
    sink: TokenSink
    arrival: float  # loop time
    ready_at: float  # loop time when the API overhead is over
    kv_need: int = 0
    computed: int = 0  # prompt tokens prefilled
    generated: int = 0
    last_token_at: float | None = None
    done: bool = False
    scheduled_at: float | None = None  # loop time it was admitted to ``running``
    first_token_at: float | None = None  # loop time of its first token


@dataclass(slots=True)
class StepPlan:
    """What one engine does in one step."""

    engine: EngineScheduler
    decode: list[SimRequest]
    chunks: list[tuple[SimRequest, int]]  # (request, chunk tokens)
    cost: float
    kind: StepKind = "shared"  # turns mode: "prefill" (chunks only) or "decode" (tokens only)


@dataclass(slots=True)
class StepObserver:
    """Callbacks an engine uses for its metrics (all durations in simulated seconds)."""

    on_first_token: Callable[[SimRequest, float], None]
    on_token_gap: Callable[[float, int], None]
    on_finish: Callable[[SimRequest, float], None]


@dataclass(slots=True)
class EngineScheduler:
    """Per-engine scheduler state: waiting queue, running batch, KV reservations."""

    preset: Preset
    max_num_seqs: int
    max_num_batched_tokens: int
    kv_cache_tokens: int
    block_size: int
    observer: StepObserver
    device: Device | None = None
    stalled: bool = False
    mode: SchedulerMode = "shared"  # how prefill and decode share steps (module docstring)
    waiting: deque[SimRequest] = field(default_factory=deque)
    running: list[SimRequest] = field(default_factory=list)
    kv_reserved: int = 0
    last_step: StepKind | None = None  # the kind of the last committed step

    def __post_init__(self) -> None:
        if self.mode not in SCHEDULER_MODES:
            raise ValueError(
                f"scheduler mode: expected {' or '.join(SCHEDULER_MODES)}, got {self.mode!r}"
            )

    def _blocks(self, tokens: int) -> int:
        return -(-tokens // self.block_size) * self.block_size

    def fits_ever(self, prompt_len: int, target_tokens: int) -> bool:
        """Could this request ever be admitted (its KV need is within the budget)?"""
        return self._blocks(prompt_len + target_tokens) <= self.kv_cache_tokens

    def submit(self, request: SimRequest) -> None:
        """Queue a request; the device wakes when its API overhead is over."""
        request.kv_need = self._blocks(request.prompt_len + request.target_tokens)
        self.waiting.append(request)
        if self.device is not None:
            self.device.wake()

    def abort(self, request: SimRequest) -> None:
        """Remove a request (client gone, restart); frees its KV."""
        if request.done:
            return
        request.done = True
        if request in self.running:
            self.running.remove(request)
            self.kv_reserved -= request.kv_need
        else:
            with contextlib.suppress(ValueError):
                self.waiting.remove(request)

    def abort_all(self) -> None:
        """Cut every request (restart): sinks see ``on_abort``."""
        victims = list(self.running) + list(self.waiting)
        self.running.clear()
        self.waiting.clear()
        self.kv_reserved = 0
        for r in victims:
            r.done = True
            r.sink.on_abort(r)

    def next_ready(self) -> float | None:
        """Loop time when the head of the waiting queue becomes schedulable (None: none waits)."""
        return self.waiting[0].ready_at if self.waiting and not self.stalled else None

    def kv_used_tokens(self) -> int:
        """KV tokens held by running sequences (block-rounded)."""
        return sum(self._blocks(r.computed + r.generated) for r in self.running)

    def plan(self, now: float) -> StepPlan | None:
        """Admit what fits and plan one step (None when there is nothing to do)."""
        if self.stalled:
            return None
        waiting, running = self.waiting, self.running
        while (
            waiting
            and waiting[0].ready_at <= now
            and len(running) < self.max_num_seqs
            and self.kv_reserved + waiting[0].kv_need <= self.kv_cache_tokens
        ):
            r = waiting.popleft()
            self.kv_reserved += r.kv_need
            r.scheduled_at = now
            running.append(r)
        if not running:
            return None
        decode: list[SimRequest] = []
        sum_ctx = 0
        for r in running:
            if r.computed >= r.prompt_len:
                decode.append(r)
                sum_ctx += r.prompt_len + r.generated
        if self.mode == "turns":
            return self._plan_turn(decode, sum_ctx)
        cost = decode_step_s(self.preset, len(decode), sum_ctx)
        chunks, cost = self._chunks(self.max_num_batched_tokens - len(decode), cost)
        return StepPlan(self, decode, chunks, cost)

    def _plan_turn(self, decode: list[SimRequest], sum_ctx: int) -> StepPlan:
        """Turns mode: a decode step when only decoding is left, or when prefill work waits too
        and the last step was a prefill step; else a prefill step (d0 plus its chunks)."""
        prefilling = len(decode) < len(self.running)
        if decode and (not prefilling or self.last_step == "prefill"):
            cost = decode_step_s(self.preset, len(decode), sum_ctx)
            return StepPlan(self, decode, [], cost, "decode")
        chunks, cost = self._chunks(self.max_num_batched_tokens, decode_step_s(self.preset, 0, 0))
        return StepPlan(self, [], chunks, cost, "prefill")

    def _chunks(self, budget: int, cost: float) -> tuple[list[tuple[SimRequest, int]], float]:
        """Prefill chunks of the running sequences, in order, within ``budget`` tokens, and
        ``cost`` plus theirs."""
        preset = self.preset
        chunks: list[tuple[SimRequest, int]] = []
        if budget > 0:
            for r in self.running:
                left = r.prompt_len - r.computed
                if left <= 0:
                    continue
                take = min(left, budget)
                chunks.append((r, take))
                cost += prefill_chunk_s(preset, r.computed, take)
                budget -= take
                if budget <= 0:
                    break
        return chunks, cost

    def commit(self, plan: StepPlan, now: float, scale: float) -> None:
        """Apply a finished step at loop time ``now``: emit tokens, retire finished requests."""
        observer = self.observer
        self.last_step = plan.kind
        finished: list[SimRequest] = []
        for r in plan.decode:
            if r.done:
                continue
            r.generated += 1
            if r.last_token_at is not None:
                observer.on_token_gap((now - r.last_token_at) * scale, 1)
            r.last_token_at = now
            end = r.generated >= r.target_tokens
            if end:
                finished.append(r)
            r.sink.on_tokens(r, 1, end)
        for r, take in plan.chunks:
            if r.done:
                continue
            r.computed += take
            if r.computed >= r.prompt_len:
                r.generated = 1
                r.last_token_at = r.first_token_at = now
                observer.on_first_token(r, (now - r.arrival) * scale)
                end = r.target_tokens <= 1
                if end:
                    finished.append(r)
                r.sink.on_tokens(r, 1, end)
        for r in finished:
            if not r.done:
                r.done = True
                self.running.remove(r)
                self.kv_reserved -= r.kv_need
                observer.on_finish(r, (now - r.arrival) * scale)


class Device:
    """One simulated GPU: a step loop shared by the engines of a ``shared_device.group``.

    ``slowdown`` multiplies every step's duration (and the API overhead before a request's first
    step, ``off_gpu_s``): 1.2 is a GPU 20 % slower than its preset, as a busy host makes one.
    """

    def __init__(self, name: str, *, time_scale: float, seed: int, slowdown: float = 1.0) -> None:
        self.name = name
        self.engines: list[EngineScheduler] = []
        self.time_scale = time_scale
        self.slowdown = slowdown
        self.noise: Callable[[], float] = lambda: 0.0
        # simulated seconds added to a step that decodes without a prefill chunk (decode_drag_s)
        self.drag: Callable[[], float] = lambda: 0.0
        self._rng = random.Random(f"{seed}:{name}")
        self._waiter: asyncio.Future[None] | None = None
        self._task: asyncio.Task[None] | None = None
        self._timeline = 0.0
        self.busy_s = 0.0  # simulated seconds spent in steps
        self.steps = 0
        self.max_engines_per_step = 0  # most engines of this device with work in one step

    def off_gpu_s(self, simulated_s: float) -> float:
        """Loop seconds for ``simulated_s`` of work off the GPU before a request's first step
        (API overhead, KV transfer), slowed down as the steps are."""
        return simulated_s * self.slowdown / self.time_scale

    def attach(self, engine: EngineScheduler) -> None:
        """Put an engine on this device."""
        engine.device = self
        self.engines.append(engine)

    def start(self) -> None:
        """Start the step loop."""
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"device-{self.name}")

    async def stop(self) -> None:
        """Stop the step loop."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    def wake(self) -> None:
        """Re-plan now (a request arrived, a stall cleared)."""
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

    async def _idle(self, loop: asyncio.AbstractEventLoop, until: float | None) -> None:
        fut: asyncio.Future[None] = loop.create_future()
        self._waiter = fut
        handle = loop.call_at(until, self.wake) if until is not None else None
        try:
            await fut
        finally:
            self._waiter = None
            if handle is not None:
                handle.cancel()

    def _jitter(self, engines: list[EngineScheduler]) -> float:
        sigma = self.noise()
        if sigma <= 0:
            sigma = max(e.preset.jitter for e in engines)
        if sigma <= 0:
            return 1.0
        return max(0.05, self._rng.gauss(1.0, sigma))

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        scale = self.time_scale
        self._timeline = loop.time()
        while True:
            now = loop.time()
            if now - self._timeline > _RESYNC_S:
                self._timeline = now
            start = self._timeline  # at or a little before now: steps follow an absolute timeline
            plans = [p for e in self.engines if (p := e.plan(start)) is not None]
            if not plans:
                ready = [t for e in self.engines if (t := e.next_ready()) is not None]
                until = min(ready) if ready else None
                await self._idle(loop, until)
                woke = loop.time()
                # a request whose API overhead ended at `until` starts its step then, not on wake-up
                self._timeline = until if until is not None and until <= woke else woke
                continue
            cost = sum(p.cost for p in plans)
            if not any(p.chunks for p in plans):
                cost += self.drag()
            duration = cost * self._jitter([p.engine for p in plans]) * self.slowdown / scale
            end = start + duration
            self.busy_s += duration * scale
            self.steps += 1
            self.max_engines_per_step = max(self.max_engines_per_step, len(plans))
            delay = end - loop.time() - _WAKE_BIAS_S
            await asyncio.sleep(max(delay, 0.0))  # always yield: a late device must not starve I/O
            self._timeline = end
            for p in plans:
                p.engine.commit(p, end, scale)
