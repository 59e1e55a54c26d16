"""Start a simulated fleet as a subprocess from tests: ``start_sim_fleet(...)`` → ``SimFleet``.

Example::

    with start_sim_fleet(tmp_path, [{"iid": "e0", "role": "mixed"}], preset="tiny") as fleet:
        url = fleet.urls["e0"]
        fleet.set_faults("e0", health_status=503)

Timing laws are tested in-process on a virtual clock instead (no wall time)::

    async def cohort() -> list[TokenStamps]:
        gpu = VirtualGpu()
        engine = gpu.engine(get_preset().with_overrides(jitter=0.0))
        streams = [gpu.submit(engine, 2048, 64) for _ in range(16)]
        await asyncio.gather(*(s.done for s in streams))
        await gpu.stop()
        return streams

    run_on_virtual_clock(cohort())
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import orjson

from narwhal_sim._errors import SimConfigError, SimStartError
from narwhal_sim._fleet import write_atomic
from narwhal_sim.model._virtual import (
    TokenStamps,
    VirtualClockLoop,
    VirtualGpu,
    run_on_virtual_clock,
)

__all__ = [
    "SimFleet",
    "TokenStamps",
    "VirtualClockLoop",
    "VirtualGpu",
    "fleet_document",
    "free_port",
    "run_on_virtual_clock",
    "sim_config",
    "start_sim_fleet",
]

_READY_TIMEOUT_S = 30.0
_STOP_TIMEOUT_S = 10.0


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free on ``host`` right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _post(url: str, body: Mapping[str, Any] | None, timeout: float = 10.0) -> Any:
    data = orjson.dumps(body if body is not None else {})
    req = urllib.request.Request(
        url, data=data, method="POST", headers={"content-type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return orjson.loads(resp.read())
    except urllib.error.HTTPError as exc:
        raise SimConfigError(
            f"{url}: HTTP {exc.code}: {exc.read().decode(errors='replace')}"
        ) from exc
    except (urllib.error.URLError, OSError) as exc:
        raise SimStartError(f"{url}: {exc}") from exc


@dataclass
class SimFleet:
    """A running simulated fleet (subprocess): URLs, fault control, stop."""

    workdir: Path
    fleet_path: Path
    sim_config_path: Path
    urls: dict[str, str]
    router_url: str | None
    journal_path: Path | None
    process: subprocess.Popen[bytes]
    log_path: Path
    _stopped: bool = field(default=False, repr=False)

    def set_faults(self, iid: str, **faults: Any) -> dict[str, Any]:
        """Merge faults into engine ``iid`` (``None`` clears a fault); returns the active set."""
        result = _post(f"{self.urls[iid]}/_sim/faults", faults)
        return dict(result["faults"])

    def restart(self, iid: str) -> float:
        """Restart engine ``iid`` (in-flight requests cut); returns its new process start time."""
        return float(_post(f"{self.urls[iid]}/_sim/restart", None)["process_start_time_seconds"])

    def state(self, iid: str) -> dict[str, Any]:
        """The engine's scheduler state (``GET /_sim/state``)."""
        with urllib.request.urlopen(f"{self.urls[iid]}/_sim/state", timeout=10) as resp:
            return dict(orjson.loads(resp.read()))

    def idle_gaps(self, iid: str) -> list[tuple[float, float]]:
        """Engine ``iid``'s idle gaps between busy spans, ``(start_s, duration_s)``."""
        with urllib.request.urlopen(f"{self.urls[iid]}/_sim/activity", timeout=10) as resp:
            return [(float(a), float(b)) for a, b in orjson.loads(resp.read())["idle_gaps"]]

    def stop(self) -> None:
        """SIGTERM the simulator and wait for it (SIGKILL after a timeout)."""
        if self._stopped:
            return
        self._stopped = True
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=_STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def __enter__(self) -> SimFleet:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def sim_config(
    defaults: Mapping[str, Any] | None = None, **engines: Mapping[str, Any]
) -> dict[str, Any]:
    """A ``narwhal.sim`` document: ``defaults`` for every engine, keyword tables per iid."""
    return {
        "format": "narwhal.sim",
        "format_version": 1,
        "defaults": dict(defaults or {}),
        "engines": {iid: dict(table) for iid, table in engines.items()},
    }


def fleet_document(
    engines: Sequence[Mapping[str, Any]], ports: Mapping[str, int]
) -> dict[str, Any]:
    """A narwhal.fleet document for ``engines`` (entries without ``url``) on loopback ``ports``."""
    entries = []
    for e in engines:
        if "url" in e:
            raise SimConfigError(
                f"engine {e.get('iid')!r}: leave out url, start_sim_fleet picks ports"
            )
        entry = {
            "iid": e["iid"],
            "url": f"http://127.0.0.1:{ports[e['iid']]}",
            "role": e.get("role", "mixed"),
        }
        entry.update({k: v for k, v in e.items() if k not in ("iid", "role")})
        entries.append(entry)
    return {
        "format": "narwhal.fleet",
        "format_version": 1,
        "profiles": {"path": "profiles/fleet-profiles.json"},
        "engines": entries,
    }


def start_sim_fleet(
    workdir: Path,
    engines: list[dict[str, Any]],
    *,
    sim_config: dict[str, Any] | None = None,
    router: bool = False,
    time_scale: float = 1.0,
    preset: str | None = None,
    seed: int = 0,
    ready_timeout_s: float = _READY_TIMEOUT_S,
    router_options: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    slowdown: float = 1.0,
    ports: Mapping[str, int] | None = None,
) -> SimFleet:
    """Write ``fleet.json``, ``sim-config.json`` into ``workdir``; run ``narwhal-sim up``.

    ``slowdown`` is ``up --slowdown`` (every engine that much slower than its preset); ``ports``
    puts the engines on the given ports (a fleet started again where it ran, as a restarted
    deployment), else free ones are picked.

    ``router_options`` are extra ``up`` arguments for the router (``--router-api-key-env NAME``,
    ``--router-auth-scope all``, ``--router-omit tokenize``...); ``env`` adds variables to the
    simulator's environment only (engine and router keys), not to this process's.
    """
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    iids = [str(e["iid"]) for e in engines]
    if len(set(iids)) != len(iids) or not iids:
        raise SimConfigError("engines: give at least one engine, with unique iids")
    attempts = 3
    last_error: SimStartError | None = None
    for _ in range(attempts):  # a picked port can be taken before the child binds it: retry
        chosen = dict(ports) if ports is not None else {iid: free_port() for iid in iids}
        try:
            return _launch(
                workdir,
                engines,
                chosen,
                sim_config,
                router,
                (time_scale, slowdown),
                preset,
                seed,
                ready_timeout_s,
                tuple(router_options),
                dict(env or {}),
            )
        except SimStartError as exc:
            last_error = exc
            if "cannot listen" not in str(exc) or ports is not None:
                raise
    assert last_error is not None
    raise last_error


def _launch(
    workdir: Path,
    engines: list[dict[str, Any]],
    ports: dict[str, int],
    sim_doc: dict[str, Any] | None,
    router: bool,
    speed: tuple[float, float],
    preset: str | None,
    seed: int,
    ready_timeout_s: float,
    router_options: tuple[str, ...],
    env: dict[str, str],
) -> SimFleet:
    fleet_path = workdir / "fleet.json"
    write_atomic(
        fleet_path, orjson.dumps(fleet_document(engines, ports), option=orjson.OPT_INDENT_2)
    )
    sim_path = workdir / "sim-config.json"
    write_atomic(sim_path, orjson.dumps(sim_doc or sim_config(), option=orjson.OPT_INDENT_2))
    ready = workdir / "sim-ready.json"
    ready.unlink(missing_ok=True)
    log_path = workdir / "sim.log"
    cmd = [
        sys.executable,
        "-m",
        "narwhal_sim",
        "up",
        "--fleet",
        str(fleet_path),
        "--sim-config",
        str(sim_path),
        "--time-scale",
        repr(float(speed[0])),
        "--slowdown",
        repr(float(speed[1])),
        "--seed",
        str(seed),
        "--ready-file",
        str(ready),
    ]
    if preset:
        cmd += ["--preset", preset]
    journal = None
    if router:
        journal = workdir / "router-journal.jsonl"
        cmd += ["--router", f"127.0.0.1:{free_port()}", "--journal", str(journal)]
        cmd += router_options
    log = log_path.open("wb")
    try:
        proc = subprocess.Popen(
            cmd,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={
                **os.environ,
                **env,
                "PYTHONUNBUFFERED": "1",
                "NARWHAL_SIM_PARENT_PID": str(os.getpid()),
            },
        )
    finally:
        log.close()
    deadline = time.monotonic() + ready_timeout_s
    while not ready.exists():
        if proc.poll() is not None:
            raise SimStartError(f"narwhal-sim exited with {proc.returncode}: {_tail(log_path)}")
        if time.monotonic() > deadline:
            proc.kill()
            proc.wait()
            raise SimStartError(
                f"narwhal-sim not ready after {ready_timeout_s:.0f} s: {_tail(log_path)}"
            )
        time.sleep(0.02)
    doc = orjson.loads(ready.read_bytes())
    return SimFleet(
        workdir,
        fleet_path,
        sim_path,
        dict(doc["engines"]),
        doc.get("router"),
        journal,
        proc,
        log_path,
    )


def _tail(path: Path, limit: int = 2000) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no output)"
    return text[-limit:].strip() or "(no output)"
