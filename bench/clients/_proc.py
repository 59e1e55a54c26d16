"""Child processes of the benchmark: core pinning, CPU accounting, the counterpart's lifecycle."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from narwhal_sim.testing import free_port

COUNTERPART = Path(__file__).resolve().parent / "counterpart.py"
SERVER_CORE = 0
CLIENT_CORE = 1


class BenchError(Exception):
    """The benchmark could not run a step (a server that does not start, a client that hangs)."""


def pin_prefix(core: int) -> list[str]:
    """``taskset -c CORE`` when taskset exists and this process may use that core, else
    nothing."""
    taskset = shutil.which("taskset")
    if taskset is None or core not in os.sched_getaffinity(0):
        return []
    return [taskset, "-c", str(core)]


def pinning_note() -> str:
    """How server and clients were placed, for the report."""
    if pin_prefix(SERVER_CORE) and pin_prefix(CLIENT_CORE):
        return f"server pinned to core {SERVER_CORE}, clients to core {CLIENT_CORE} (taskset)"
    return "not pinned (taskset or a second core is missing)"


@dataclass(frozen=True, slots=True)
class Finished:
    """A child that ended: exit code, its CPU (itself plus every descendant it waited for),
    wall time."""

    exit_code: int
    cpu_user_s: float
    cpu_system_s: float
    wall_s: float

    @property
    def cpu_s(self) -> float:
        """User plus system CPU seconds."""
        return self.cpu_user_s + self.cpu_system_s


def run_measured(
    argv: Sequence[str],
    *,
    cwd: Path,
    log: Path,
    timeout_s: float,
    env: Mapping[str, str] | None = None,
    core: int | None = CLIENT_CORE,
) -> Finished:
    """Run ``argv`` (pinned to ``core``) to its end and return its exit code and CPU.

    The CPU comes from ``wait4``: the child's own usage plus that of every descendant it reaped
    (AIPerf's and guidellm's worker processes). Output goes to ``log``. A child still running
    after ``timeout_s`` is killed with its process group and BenchError is raised; so is it when
    this process is interrupted.
    """
    full = [*(pin_prefix(core) if core is not None else []), *argv]
    child_env = dict(os.environ if env is None else env)
    # Bytecode caching on for every client alike: pip compiled the peers' venvs at install time,
    # while this machine's PYTHONDONTWRITEBYTECODE=1 would make narwhal recompile on every start.
    child_env.pop("PYTHONDONTWRITEBYTECODE", None)
    start = time.perf_counter()
    with log.open("wb") as out:
        proc = subprocess.Popen(
            full,
            cwd=cwd,
            env=child_env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            while True:
                pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
                if pid == proc.pid:
                    break
                if time.perf_counter() - start > timeout_s:
                    raise BenchError(f"{Path(argv[0]).name} ran over {timeout_s:g} s; see {log}")
                time.sleep(0.05)
        except BaseException:  # timeout or Ctrl-C: end the child's whole process group
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.wait4(proc.pid, 0)
            proc.returncode = -9
            raise
    proc.returncode = os.waitstatus_to_exitcode(status)
    return Finished(
        exit_code=proc.returncode,
        cpu_user_s=usage.ru_utime,
        cpu_system_s=usage.ru_stime,
        wall_s=time.perf_counter() - start,
    )


class Counterpart:
    """The stamping counterpart server in its own process; ``stop`` writes its stamps."""

    def __init__(self, folder: Path, *, ttft_ms: float, token_ms: float) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.stamps = folder / "server-stamps.jsonl"
        self.log = folder / "server.log"
        self.cpu_s: float | None = None
        argv = [
            *pin_prefix(SERVER_CORE),
            sys.executable,
            str(COUNTERPART),
            "--port",
            str(self.port),
            "--stamps",
            str(self.stamps),
            "--ttft-ms",
            f"{ttft_ms:g}",
            "--token-ms",
            f"{token_ms:g}",
        ]
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT
            )
        self._wait_ready()

    def _wait_ready(self, timeout_s: float = 15.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise BenchError(f"the counterpart exited early; see {self.log}")
            with (
                contextlib.suppress(OSError),
                urllib.request.urlopen(f"{self.url}/health", timeout=1) as answer,
            ):
                if answer.status == 200:
                    return
            time.sleep(0.05)
        self.stop()
        raise BenchError(f"the counterpart did not answer /health in {timeout_s:g} s")

    def stop(self) -> Path:
        """SIGTERM, wait, and return the stamp file; ``cpu_s`` then holds the server's CPU."""
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + 30
            while True:
                pid, status, usage = os.wait4(self.proc.pid, os.WNOHANG)
                if pid == self.proc.pid:
                    self.proc.returncode = os.waitstatus_to_exitcode(status)
                    self.cpu_s = usage.ru_utime + usage.ru_stime
                    break
                if time.monotonic() > deadline:
                    self.proc.kill()
                    self.proc.wait()
                    raise BenchError("the counterpart did not stop in 30 s")
                time.sleep(0.02)
        if not self.stamps.exists():
            raise BenchError(f"the counterpart wrote no stamps; see {self.log}")
        return self.stamps
