"""The simulator's scheduler on a virtual clock: timing laws tested without wall time.

``VirtualClockLoop`` is an asyncio loop whose clock jumps to the next timer whenever nothing is
ready, so a simulated second costs microseconds and a busy machine cannot bend a measurement.
``VirtualGpu`` puts engine schedulers on one ``Device`` (the code the HTTP engines run) and records
every token's step-end stamp on the device's own timeline.
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

from narwhal_sim.model._presets import Preset
from narwhal_sim.model._scheduler import (
    Device,
    EngineScheduler,
    SchedulerMode,
    SimRequest,
    StepObserver,
)

T = TypeVar("T")


class _VirtualSelector(selectors.DefaultSelector):
    """Polls real file descriptors without blocking; a wait advances the loop's virtual clock."""

    def __init__(self, loop: VirtualClockLoop) -> None:
        super().__init__()
        self._loop = loop

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        events = super().select(0)
        if events or timeout == 0:
            return events
        if timeout is None:
            raise RuntimeError("virtual clock: nothing is scheduled, the loop would wait forever")
        self._loop.advance(timeout)
        return events


class VirtualClockLoop(asyncio.SelectorEventLoop):
    """An event loop on virtual time: ``time()`` moves only when the loop would otherwise sleep."""

    def __init__(self, start: float = 0.0) -> None:
        self._virtual_now = start
        super().__init__(selector=_VirtualSelector(self))

    def time(self) -> float:
        return self._virtual_now

    def advance(self, seconds: float) -> None:
        """Move the clock forward (the selector does this instead of blocking)."""
        self._virtual_now += seconds


def run_on_virtual_clock(main: Coroutine[Any, Any, T]) -> T:
    """Run ``main`` to completion on a fresh ``VirtualClockLoop``."""
    with asyncio.Runner(loop_factory=VirtualClockLoop) as runner:
        return runner.run(main)


@dataclass(eq=False)
class TokenStamps:
    """One request on the device timeline (loop seconds): arrival and each token's step end."""

    arrival: float
    tokens: list[float] = field(default_factory=list)
    done: asyncio.Future[bool] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )

    @property
    def ttft(self) -> float:
        """First token minus arrival."""
        return self.tokens[0] - self.arrival

    def on_tokens(self, request: SimRequest, count: int, finished: bool) -> None:
        assert request.last_token_at is not None
        self.tokens.extend([request.last_token_at] * count)
        if finished and not self.done.done():
            self.done.set_result(True)

    def on_abort(self, request: SimRequest) -> None:
        if not self.done.done():
            self.done.set_result(False)


def _ignore(*_: object) -> None:
    return None


class VirtualGpu:
    """One simulated device with engines on it, driven in-process (no HTTP) from a running loop.

    Use inside ``run_on_virtual_clock``: ``gpu = VirtualGpu(); e = gpu.engine(preset)``,
    ``stamps = gpu.submit(e, prompt_len, tokens)``, ``await stamps.done``, then ``gpu.stop()``.
    """

    def __init__(self, *, time_scale: float = 1.0, seed: int = 0, slowdown: float = 1.0) -> None:
        self.device = Device("virtual", time_scale=time_scale, seed=seed, slowdown=slowdown)
        self._count = 0

    def engine(
        self, preset: Preset, *, scheduler: SchedulerMode = "shared", **limits: int
    ) -> EngineScheduler:
        """A new engine on this device (``max_num_seqs``, ``kv_cache_tokens``, ... from ``preset``
        unless given; ``scheduler`` as the sim config's: ``shared`` or ``turns``); the device's
        step loop starts with the first engine."""
        engine = EngineScheduler(
            preset=preset,
            max_num_seqs=limits.pop("max_num_seqs", preset.max_num_seqs),
            max_num_batched_tokens=limits.pop(
                "max_num_batched_tokens", preset.max_num_batched_tokens
            ),
            kv_cache_tokens=limits.pop("kv_cache_tokens", preset.kv_cache_tokens),
            block_size=limits.pop("block_size", preset.block_size),
            observer=StepObserver(_ignore, _ignore, _ignore),
            mode=scheduler,
        )
        if limits:
            raise TypeError(f"unknown engine limits: {sorted(limits)}")
        first = not self.device.engines
        self.device.attach(engine)
        if first:
            self.device.start()
        return engine

    def submit(self, engine: EngineScheduler, prompt_len: int, tokens: int) -> TokenStamps:
        """A request arriving now, ready after the preset's API overhead (as over HTTP)."""
        now = asyncio.get_running_loop().time()
        stamps = TokenStamps(now)
        ready = now + self.device.off_gpu_s(engine.preset.api_overhead)
        self._count += 1
        engine.submit(SimRequest(f"v{self._count}", prompt_len, tokens, stamps, now, ready))
        return stamps

    async def stop(self) -> None:
        """Stop the device's step loop."""
        await self.device.stop()
