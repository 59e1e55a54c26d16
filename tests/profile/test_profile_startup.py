"""Start-up cost: ``--version`` and ``--help`` load no measurement or fitting library.

The command's own modules must not pull scipy, numpy, httpx or pydantic before a mode runs; these
are behaviour checks on ``sys.modules`` in a fresh interpreter, not timings.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

_HEAVY = ("scipy", "numpy", "httpx", "pydantic", "rich")

_PROBE = """
import sys
from narwhal_profile_cli import run
code = run(sys.argv[1:])
heavy = [m for m in {heavy!r} if m in sys.modules]
print("LOADED", ",".join(heavy) or "-", code)
"""


def _loaded(*args: str) -> tuple[list[str], int, str]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE.format(heavy=_HEAVY), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    marker = [line for line in done.stdout.splitlines() if line.startswith("LOADED ")]
    assert marker, done.stdout + done.stderr
    _, names, code = marker[-1].split(" ")
    return ([] if names == "-" else names.split(",")), int(code), done.stdout


@pytest.mark.parametrize("flag", ["--version", "--help"])
def test_version_and_help_load_no_heavy_library(flag: str) -> None:
    """Nothing heavy is imported to print the version or the help."""
    loaded, code, out = _loaded(flag)
    assert code == 0
    assert loaded == [], f"{flag} imported {loaded}"
    assert ("narwhal-profile" in out) if flag == "--version" else ("--fleet PATH" in out)


def test_a_mode_still_loads_what_it_needs() -> None:
    """The probe can fail: a mode that reaches the store layer does import pydantic."""
    loaded, code, _ = _loaded("--fleet", "/nonexistent/fleet.json")
    assert code == 2
    assert "pydantic" in loaded
