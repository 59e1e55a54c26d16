"""``make install-check``: every install line of the READMEs, run exactly as written outside the
workspace, and what each one installed checked (docs/packaging.md).

Runs the pytest tier in ``tools/install_check`` (which ``make test`` never collects) and prints
its wall time. Exit 0 only when every test passed and none was skipped; 1 otherwise; 130 when
interrupted.

Run from the checkout's root: ``.venv/bin/python -m tools.install_check.run [PYTEST ARGS...]``.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PYTEST_ARGS = ("-p", "no:cacheprovider", "-v", "--durations=0", "--strict-markers")


def main(argv: list[str]) -> int:
    """Run the tier; print the wall time."""
    start = time.monotonic()
    command = [sys.executable, "-m", "pytest", "tools/install_check", *PYTEST_ARGS, *argv]
    try:
        code = subprocess.run(command, cwd=REPO, check=False).returncode
    except KeyboardInterrupt:
        print("install-check: interrupted", flush=True)
        return 130
    wall = time.monotonic() - start
    verdict = "passed" if code == 0 else "FAILED"
    print(f"install-check: {verdict} in {wall:.0f} s (pytest exit {code})", flush=True)
    return 0 if code == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
