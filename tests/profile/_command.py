"""Run the real ``narwhal-profile`` command as a subprocess (shared by every test here: the
conftest's fixtures and the modes tests import it)."""

from __future__ import annotations

import itertools
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson


@dataclass(frozen=True)
class ProfileRun:
    """One finished ``narwhal-profile`` process."""

    returncode: int
    stdout: str
    stderr: str

    def result(self) -> dict[str, Any]:
        """The single JSON result object on stdout (``--format json``)."""
        lines = [line for line in self.stdout.splitlines() if line.strip()]
        assert len(lines) == 1, self.stdout
        doc = orjson.loads(lines[0])
        assert isinstance(doc, dict)
        return doc

    def success(self, line: str, engines: list[str]) -> None:
        """Text mode: one fit-quality line per engine, in order, each followed by its scheduler
        line when the profile records its scheduler settings, then the seed's success line."""
        *lines, last = self.stdout.splitlines()
        assert last == line, self.stdout
        fits = [f for f in lines if ": scheduler: " not in f]
        assert [f.split(": ", 1)[0] for f in fits] == engines, self.stdout
        for fit in fits:
            assert "prefill fit mean " in fit and "; decode fit mean " in fit, fit
        for previous, scheduler in itertools.pairwise(lines):
            if ": scheduler: " in scheduler:
                assert previous.split(": ", 1)[0] == scheduler.split(": ", 1)[0], self.stdout


def run_profile_command(*args: str | Path, timeout: float = 240.0) -> ProfileRun:
    """Run ``python -m narwhal_profile_cli ARGS`` and capture its outputs."""
    done = subprocess.run(
        [sys.executable, "-m", "narwhal_profile_cli", *(str(a) for a in args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    return ProfileRun(done.returncode, done.stdout, done.stderr)


def interrupt_once_written(store: Path, *args: str | Path, wait_s: float = 120.0) -> ProfileRun:
    """Start the command, send SIGINT (Ctrl-C) as soon as ``store`` exists, and wait for it."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "narwhal_profile_cli", *(str(a) for a in args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + wait_s
        while not store.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return ProfileRun(proc.returncode, stdout, stderr)
