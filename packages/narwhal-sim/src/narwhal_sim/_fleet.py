"""Build and run a simulated fleet (devices, engines, router) inside one event loop."""

from __future__ import annotations

import asyncio
import os
import signal
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from narwhal_sim._auth import env_key
from narwhal_sim._errors import SimStartError
from narwhal_sim.engine._engine import SimEngine
from narwhal_sim.model._config import EngineSettings, base_url
from narwhal_sim.model._scheduler import Device
from narwhal_sim.router._router import Backend, Router
from narwhal_sim.router.dynamo._router import DynamoRouter


@dataclass(slots=True)
class RouterSettings:
    """Where the router listens and journals; its key (read from ``api_key_env`` at start), the
    routes the key guards (``v1`` as vLLM, or ``all``), what it leaves out (``ROUTER_OMITS``), the
    frontend it mimics (``MIMICS``) and the context length that one reports."""

    host: str
    port: int
    journal: Path | None
    api_key_env: str | None = None
    auth_scope: str = "v1"
    omit: frozenset[str] = frozenset()
    # a frontend the router stands in for (``MIMICS``: "dynamo"), and the context length it reports
    mimic: str | None = None
    context_length: int = 0


@dataclass(slots=True)
class SimFleetRuntime:
    """Every device, engine and the router of one running simulation."""

    engines: list[SimEngine]
    devices: dict[str, Device]
    router: Router | None = None
    router_url: str | None = None
    listening: list[str] = field(default_factory=list)

    async def stop(self) -> None:
        """Stop the router, the engines and the device loops."""
        if self.router is not None:
            await self.router.stop()
        for engine in self.engines:
            await engine.stop()
        for device in self.devices.values():
            await device.stop()


def _device_noise(engines: list[SimEngine]) -> Callable[[], float]:
    def noise() -> float:
        return max((e.faults.noise or 0.0) for e in engines)

    return noise


def _device_drag(engines: list[SimEngine]) -> Callable[[], float]:
    def drag() -> float:
        return max((e.faults.decode_drag_s or 0.0) for e in engines)

    return drag


async def start_runtime(
    settings: list[EngineSettings],
    *,
    router: RouterSettings | None,
    time_scale: float,
    seed: int,
    slowdown: float = 1.0,
) -> SimFleetRuntime:
    """Create devices per ``shared_device.group``, start every engine and the router;
    ``slowdown`` multiplies every device's step durations (``Device``)."""
    devices: dict[str, Device] = {}
    engines: list[SimEngine] = []
    for s in settings:
        device = devices.get(s.group)
        if device is None:
            device = devices[s.group] = Device(
                s.group, time_scale=time_scale, seed=seed, slowdown=slowdown
            )
        engines.append(SimEngine(s, device, seed=seed))
    for device in devices.values():
        device.noise = _device_noise([e for e in engines if e.device is device])
        device.drag = _device_drag([e for e in engines if e.device is device])
        device.start()
    runtime = SimFleetRuntime(engines, devices)
    try:
        for engine in engines:
            try:
                await engine.start()
            except OSError as exc:
                raise SimStartError(
                    f"engine {engine.settings.iid}: cannot listen on {engine.settings.url}: "
                    f"{exc.strerror or exc}"
                ) from exc
            runtime.listening.append(
                f"engine {engine.settings.iid} ({engine.settings.role}, group "
                f"{engine.settings.group}, {engine.settings.preset.name}) {engine.settings.url}"
            )
        if router is not None:
            backends = [
                Backend(
                    e.settings.iid,
                    e.settings.host,
                    e.settings.port,
                    e.settings.role,
                    e.settings.served_model_name,
                    api_key=e.api_key,
                    max_num_seqs=e.settings.max_num_seqs,
                    max_num_batched_tokens=e.settings.max_num_batched_tokens,
                    block_size=e.settings.block_size,
                    kv_blocks=e.settings.kv_cache_tokens // e.settings.block_size,
                )
                for e in engines
            ]
            common: dict[str, Any] = {
                "journal": router.journal,
                "engine_gauges": lambda: _engine_gauges(engines),
                "api_key": env_key(router.api_key_env),
                "auth_scope": router.auth_scope,
                "omit": router.omit,
            }
            runtime.router = (
                DynamoRouter(backends, context_length=router.context_length, **common)
                if router.mimic == "dynamo"
                else Router(backends, **common)
            )
            try:
                await runtime.router.start(router.host, router.port)
            except OSError as exc:
                raise SimStartError(
                    f"router: cannot listen on {router.host}:{router.port}: {exc.strerror or exc}"
                ) from exc
            runtime.router_url = base_url(router.host, router.port)
            journal = f" journal {router.journal}" if router.journal else ""
            runtime.listening.append(f"router {runtime.router_url}{journal}")
    except BaseException:
        await runtime.stop()
        raise
    return runtime


def _engine_gauges(engines: list[SimEngine]) -> list[tuple[str, str, float]]:
    running = sum(len(e.scheduler.running) for e in engines)
    waiting = sum(len(e.scheduler.waiting) for e in engines)
    return [
        (
            "vllm:num_requests_running",
            "Requests running on the fleet's engines (sum).",
            float(running),
        ),
        (
            "vllm:num_requests_waiting",
            "Requests waiting on the fleet's engines (sum).",
            float(waiting),
        ),
    ]


def ready_document(runtime: SimFleetRuntime) -> dict[str, Any]:
    """The ready-file content: engine addresses by iid and the router URL."""
    return {
        "format": "narwhal.sim.ready",
        "format_version": 1,
        "pid": os.getpid(),
        "engines": {e.settings.iid: e.settings.url for e in runtime.engines},
        "router": runtime.router_url,
    }


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (temp file in the same folder, fsync, rename); a
    failure is a SimStartError naming the file (``up`` checked the place before listening)."""
    try:
        _write_atomic(path, data)
    except OSError as exc:
        raise SimStartError(f"cannot write {path}: {exc.strerror or exc}") from exc


def _write_atomic(path: Path, data: bytes) -> None:
    if path.is_symlink():
        raise SimStartError(f"refusing to write through a symlink: {path}")
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        Path(tmp).replace(path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


async def serve(
    settings: list[EngineSettings],
    *,
    router: RouterSettings | None,
    time_scale: float,
    seed: int,
    ready_file: Path | None,
    announce: Callable[[str], None],
    parent_pid: int | None = None,
    slowdown: float = 1.0,
) -> None:
    """Run until SIGINT/SIGTERM (or until process ``parent_pid`` is gone), then stop cleanly."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    watchdog = loop.create_task(_watch_parent(parent_pid, stop)) if parent_pid else None
    try:
        runtime = await start_runtime(
            settings, router=router, time_scale=time_scale, seed=seed, slowdown=slowdown
        )
        try:
            for line in runtime.listening:
                announce(line)
            if ready_file is not None:
                write_atomic(
                    ready_file, orjson.dumps(ready_document(runtime), option=orjson.OPT_INDENT_2)
                )
            announce("serving; Ctrl-C stops")
            await stop.wait()
        finally:
            await runtime.stop()
    finally:
        if watchdog is not None:
            watchdog.cancel()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


async def _watch_parent(pid: int, stop: asyncio.Event) -> None:
    """Set ``stop`` once the process that started us is gone (a killed test leaves no server)."""
    while os.getppid() == pid:  # noqa: ASYNC110 - no event exists for a parent's death: poll
        await asyncio.sleep(1.0)
    stop.set()
