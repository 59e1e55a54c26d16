"""``make newer-python``: the packages' wheels and a part of the test suite on a newer CPython.

The machine's only CPython is Debian 12's 3.11, which ``make test`` uses. Debian 13 (trixie) ships
CPython 3.13 from the same archive, so this tier makes (once; reused after) a minimal trixie root
with debootstrap and runs in it under ``chroot``:

1. root: make or reuse ``$NARWHAL_NEWER_PYTHON_ROOT`` (default
   ``~/.cache/narwhal-newer-python/trixie``; ``--fresh`` makes it again);
2. wheels: ``uv build --all-packages`` from the checkout;
3. copy: the tests and what they read into ``ROOT/narwhal/repo`` (no package sources), the host's
   ``/etc/resolv.conf`` and CA bundle for pip;
4. install: a fresh venv of the root's ``python3``, the seven wheels as files and the test
   dependencies from the package index (``--only-binary=:all:``);
5. tests: pytest over ``_suite.TESTS`` less ``_suite.LEFT_OUT`` (the slowest end-to-end files)
   with the root ``pyproject.toml``'s settings (every warning an error; deprecations are errors
   in the tests' subprocesses too).

``/proc`` and a private ``/dev/shm`` are mounted in the root for steps 4 and 5 and always
unmounted after them (with any process left running in the root killed first).

Prints the root's Python version and each step's wall time. Exit 0 only when every selected test
passed and none was skipped or xfailed; 1 when a step fails or a test fails or is skipped; 130
when interrupted. Needs root (debootstrap, mount, chroot) on Linux.

Run from the checkout's root: ``.venv/bin/python -m tools.newer_python.run [--fresh] [PYTEST
ARGS...]`` (extra pytest arguments go after the selected tests: ``-x``, ``-k NAME``, ...).
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable
from types import FrameType
from typing import TypeVar

from ._root import ROOT_ENV, RootError, default_root, ensure_root, kill_processes_in, locked
from ._root import mounted as mounted_root
from ._suite import (
    Installed,
    Outcome,
    Run,
    build_wheels,
    copy_checkout,
    install,
    prepare_root,
    run_tests,
    selection,
    shown_versions,
    write_results,
)

T = TypeVar("T")


def say(text: str) -> None:
    """One line of progress, at once."""
    print(f"newer-python: {text}", flush=True)


class Steps:
    """Each step's wall time, in order."""

    def __init__(self) -> None:
        self.walls: dict[str, float] = {}

    def timed(self, name: str, action: Callable[[], T]) -> T:
        """Run one step; its wall time is kept (and printed) even when it fails."""
        start = time.monotonic()
        say(f"{name}: started")
        try:
            return action()
        finally:
            self.walls[name] = round(time.monotonic() - start, 1)
            say(f"{name}: {self.walls[name]:.1f} s")


def _interrupted(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str]) -> int:
    """Make or reuse the root, build, copy, install, test; print the figures."""
    fresh = "--fresh" in argv
    extra = [a for a in argv if a != "--fresh"]
    if sys.platform != "linux" or os.geteuid() != 0:
        say("FAILED: needs root on Linux (debootstrap, mount and chroot)")
        return 1
    signal.signal(signal.SIGTERM, _interrupted)  # a cancelled CI job still unmounts
    start = time.monotonic()
    root = default_root()
    say(f"root {root} (set {ROOT_ENV} to move it)")
    steps = Steps()
    selected, stale = selection()
    for path in stale:
        say(f"note: {path} is left out but no longer exists (_suite.LEFT_OUT)")
    results: dict[str, object] = {"root": str(root), "pytest_selection": selected}
    outcome: Outcome | None = None
    run = Run(root)
    try:
        with locked(root):
            stray = kill_processes_in(root) if root.is_dir() else []
            if stray:
                say(f"killed {len(stray)} process(es) an earlier run left in the root: {stray}")
            report = steps.timed(
                "root", lambda: ensure_root(root, root.parent / f"{root.name}.log", fresh=fresh)
            )
            say(
                f"root {'made' if report.made else 'reused'}: Python {report.python}"
                f" (log of its make: {root.parent / f'{root.name}.log'})"
            )
            if report.hexversion < 0x030C0000:
                say(f"FAILED: the root's Python {report.python} is not newer than 3.11")
                return 1
            results |= {"python": report.python, "root_made": report.made}
            run.reset()
            say(f"run folder {run.folder}")
            wheels = steps.timed("wheels", lambda: build_wheels(run))
            say(f"{len(wheels)} wheels: {', '.join(w.rsplit('/', 1)[-1] for w in wheels)}")

            def copy() -> int:
                notes = prepare_root(run)
                files = copy_checkout(run)
                say(f"copied {files} files of the checkout; {', '.join(notes)}")
                return files

            steps.timed("copy", copy)
            with mounted_root(root) as mounts:
                say(f"mounted in the root: {', '.join(mounts)}")
                installed: Installed = steps.timed("install", lambda: install(run, wheels))
                say(f"venv Python {installed.python}: {shown_versions(installed)}")
                results |= {"venv_python": installed.python, "versions": installed.versions}
                outcome = steps.timed("tests", lambda: run_tests(run, selected, extra))
                left = kill_processes_in(root)
                if left:
                    outcome.bad.append(f"{len(left)} process(es) left running in the root: {left}")
    except (RootError, OSError) as exc:
        say(f"FAILED: {exc}")
    except KeyboardInterrupt:
        say("interrupted")
        return 130
    wall = time.monotonic() - start
    results |= {"walls_s": steps.walls, "wall_s": round(wall, 1)}
    if outcome is not None:
        results |= {
            "pytest_exit": outcome.exit_code,
            "tests": outcome.tests,
            "failures": outcome.failures,
            "errors": outcome.errors,
            "skipped": outcome.skipped,
            "bad": outcome.bad,
        }
    if run.folder.is_dir():
        say(f"figures in {write_results(run, results)}")
    say("wall times: " + ", ".join(f"{k} {v:.1f} s" for k, v in steps.walls.items()))
    if outcome is None:
        say(f"FAILED in {wall:.0f} s")
        return 1
    say(
        f"Python {results.get('venv_python')}: {outcome.tests} tests, {outcome.failures} failed,"
        f" {outcome.errors} errors, {outcome.skipped} skipped (pytest exit {outcome.exit_code})"
    )
    for line in outcome.bad[:50]:
        say(f"  {line}")
    verdict = "passed" if outcome.passed and not outcome.bad else "FAILED"
    say(f"{verdict} in {wall:.0f} s")
    return 0 if verdict == "passed" else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
