"""Fixtures of the narwhal-report tests: a three-engine store and trial run folders, built through
the libraries' models (no engine, no waiting), and the command as a subprocess."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from ._kit import write_run_fixture, write_store_fixture

Cli = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A three-engine store and two 200-request runs of one workload: 0.5/s passes, 4/s misses
    (with HTTP errors and schedule misses)."""
    folder = tmp_path_factory.mktemp("inputs")
    return {
        "store": write_store_fixture(folder),
        "pass": write_run_fixture(folder / "trial" / "rate-0.5", rate=0.5),
        "miss": write_run_fixture(folder / "trial" / "rate-4", rate=4.0, misses=5, errors=6),
    }


@pytest.fixture
def cli() -> Cli:
    """Run ``narwhal-report ARGS`` from this environment; returns the completed process (text)."""

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        script = Path(sys.executable).parent / "narwhal-report"
        return subprocess.run(
            [str(script), *args], capture_output=True, text=True, timeout=240, check=False
        )

    return run
