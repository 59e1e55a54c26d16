"""Our packages installed with plain pip into an engine's own venv, as an operator would, and
taken out again.

``build_wheels`` runs ``uv build --all-packages -o FOLDER`` with the uv the Makefile uses (``$UV``,
else ``uv`` on PATH, else ``.tools/uv/bin/uv``), once per session. ``installed(venv, wheels,
dists, folder)`` then, holding an exclusive lock on the venv's folder (the venv is cached and two
runs on one machine would share it):

1. uninstalls any ``narwhal-*`` distribution already there (left by a run killed before its clean
   up), so a stale install is never what runs;
2. ``pip freeze --all`` (before); ``VENV/bin/python -m pip install`` of the wheel FILES of
   ``dists`` (a narwhal name is never looked up on an index; their other requirements come from
   pip's configured index as for any operator); ``pip freeze --all`` (after);
3. yields; then, whatever happened: uninstalls every ``narwhal-*`` distribution and every
   distribution the install added, reinstalls (``--no-deps NAME==OLD``) any version pip changed
   or removed, and freezes once more (final): the venv as it was found.

A version pip changed is a pin conflict (our lower bounds made an engine's own package move);
this module records it, the tests assert there is none. pip runs with the caller's environment
(its index settings) less ``PYTHONPATH`` and ``PYTHONHOME``, from the run's folder, never from the
checkout. Every pip command and its output goes to ``pip.log`` in that folder.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..makefile_uv import find_uv
from ._venv import InstallError, tail

REPO = Path(__file__).resolve().parents[2]
#: Minutes one pip or uv command may take (a cold cache downloads scipy and matplotlib).
PIP_TIMEOUT_S = 30 * 60
#: Variables that would put something other than the venv's own packages on its path.
PATH_VARS = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE", "VIRTUAL_ENV")
#: pip's resolver notes on requirements it did not satisfy (exit 0 all the same).
_RESOLVER_NOTE = re.compile(r"requires .*(which is not installed|but you have)")


def canonical(name: str) -> str:
    """A distribution name as PEP 503 compares them (``PyYAML`` = ``pyyaml``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def tool_env() -> dict[str, str]:
    """The caller's environment without what would put other packages on a Python's path."""
    return {k: v for k, v in os.environ.items() if k not in PATH_VARS}


def _logged(
    argv: list[str], log: Path, what: str, cwd: Path, env: Mapping[str, str]
) -> tuple[str, str]:
    """Run one command, its argv and outputs appended to ``log``; its stdout and stderr.
    InstallError with the log's tail when it fails."""
    with log.open("a", encoding="utf-8") as out:
        out.write(f"$ {' '.join(argv)}\n")  # no secrets on these command lines
    try:
        done = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            timeout=PIP_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InstallError(f"{what} failed: {exc}") from exc
    with log.open("a", encoding="utf-8") as out:
        out.write(f"{done.stdout}{done.stderr}(exit {done.returncode})\n\n")
    if done.returncode != 0:
        raise InstallError(f"{what} exited {done.returncode}; log tail:\n{tail(log)}")
    return done.stdout, done.stderr


@dataclass(frozen=True)
class Wheels:
    """The wheels one ``uv build`` wrote, by distribution name."""

    folder: Path
    files: dict[str, Path]
    wall_s: float

    def requirements(self, dists: Sequence[str], extras: Mapping[str, str]) -> list[str]:
        """pip arguments: the wheel file of each of ``dists`` (``FILE[EXTRA]`` for ``extras``)."""
        missing = [d for d in dists if d not in self.files]
        if missing:
            raise InstallError(f"no wheel for {', '.join(missing)} in {self.folder}")
        return [
            f"{self.files[d]}[{extras[d]}]" if d in extras else str(self.files[d]) for d in dists
        ]


def build_wheels(folder: Path, log: Path) -> Wheels:
    """``uv build --all-packages -o FOLDER`` from the checkout (emptied first); every wheel."""
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(mode=0o700, parents=True)
    env = tool_env()
    env.setdefault("UV_PYTHON_DOWNLOADS", "never")  # what the Makefile exports
    env.setdefault("UV_PYTHON", "python3")
    start = time.monotonic()
    try:
        uv = find_uv()
    except FileNotFoundError as exc:
        raise InstallError(str(exc)) from exc
    argv = [str(uv), "build", "--all-packages", "-o", str(folder)]
    _logged(argv, log, "uv build --all-packages", REPO, env)
    wall = time.monotonic() - start
    files: dict[str, Path] = {}
    for wheel in sorted(folder.glob("*.whl")):
        files[canonical(wheel.name.split("-", 1)[0])] = wheel
    if not files:
        raise InstallError(f"uv build wrote no wheel into {folder}; log tail:\n{tail(log)}")
    return Wheels(folder, files, wall)


def parse_freeze(text: str) -> dict[str, str]:
    """``pip freeze`` lines as {canonical name: version} (``@ URL`` for a direct reference)."""
    out: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", "-")):
            continue
        if " @ " in line:
            name, _, where = line.partition(" @ ")
            out[canonical(name)] = f"@ {where.strip()}"
        elif "==" in line:
            name, _, version = line.partition("==")
            out[canonical(name)] = version.strip()
        else:
            out[canonical(line)] = line
    return out


def requirement(name: str, version: str) -> str:
    """The pip requirement that puts ``name`` back at ``version`` (as ``pip freeze`` said it)."""
    return f"{name} {version}" if version.startswith("@") else f"{name}=={version}"


@dataclass
class Install:
    """One install of our wheels into an engine's venv: the venv's packages before, after and
    once taken out again, and the wall times."""

    venv: Path
    folder: Path
    dists: tuple[str, ...]
    #: narwhal-* distributions found (and uninstalled) before the install.
    stale: dict[str, str] = field(default_factory=dict)
    before: dict[str, str] = field(default_factory=dict)
    after: dict[str, str] = field(default_factory=dict)
    final: dict[str, str] = field(default_factory=dict)
    install_wall_s: float = 0.0
    cleanup_wall_s: float = 0.0
    #: pip's resolver notes on requirements it left unsatisfied (none of them ours to fix).
    resolver_notes: list[str] = field(default_factory=list)
    cleanup_error: str | None = None

    @property
    def python(self) -> Path:
        """The venv's interpreter."""
        return self.venv / "bin" / "python"

    @property
    def log(self) -> Path:
        """Every pip command and its output."""
        return self.folder / "pip.log"

    @property
    def changed(self) -> dict[str, tuple[str, str | None]]:
        """Every package that was there before whose version pip changed (None: removed)."""
        return {
            name: (version, self.after.get(name))
            for name, version in self.before.items()
            if self.after.get(name) != version
        }

    @property
    def added(self) -> dict[str, str]:
        """What the install added besides our own distributions."""
        return {n: v for n, v in self.after.items() if n not in self.before and not _is_narwhal(n)}

    @property
    def narwhal(self) -> dict[str, str]:
        """Our distributions after the install."""
        return {n: v for n, v in self.after.items() if _is_narwhal(n)}

    def conflicts(self) -> list[str]:
        """One line per version pip changed: ``NAME BEFORE -> AFTER``."""
        return [
            f"{name} {old} -> {new if new is not None else '(removed)'}"
            for name, (old, new) in sorted(self.changed.items())
        ]

    def figures(self) -> dict[str, Any]:
        """What results.json keeps."""
        return {
            "venv": str(self.venv),
            "installed": sorted(self.dists),
            "stale_removed_first": self.stale,
            "packages_before": len(self.before),
            "added": self.added,
            "versions_changed": self.conflicts(),
            "resolver_notes": self.resolver_notes,
            "install_wall_s": round(self.install_wall_s, 1),
            "cleanup_wall_s": round(self.cleanup_wall_s, 1),
            "left_as_found": self.final == self.before,
            "cleanup_error": self.cleanup_error,
        }


def _is_narwhal(name: str) -> bool:
    return name.startswith("narwhal-")


def freeze(install: Install, name: str) -> dict[str, str]:
    """``pip freeze --all`` of the venv, kept as ``freeze-NAME.txt`` in the folder."""
    text, _ = _pip(install, ["freeze", "--all"], f"pip freeze ({name})")
    (install.folder / f"freeze-{name}.txt").write_text(text, encoding="utf-8")
    return parse_freeze(text)


def _pip(install: Install, args: list[str], what: str) -> tuple[str, str]:
    argv = [str(install.python), "-m", "pip", "--disable-pip-version-check", "--no-input", *args]
    return _logged(argv, install.log, what, install.folder, tool_env())


def _uninstall(install: Install, names: Sequence[str], what: str) -> None:
    if names:
        _pip(install, ["uninstall", "-y", *sorted(names)], what)


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """An exclusive lock on ``folder`` itself (no file is written into it)."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


@contextlib.contextmanager
def installed(
    venv: Path,
    wheels: Wheels,
    dists: Sequence[str],
    folder: Path,
    extras: Mapping[str, str] | None = None,
) -> Iterator[Install]:
    """Our ``dists`` installed with pip into ``venv`` from ``wheels`` (``extras`` per
    distribution), taken out again on exit (also on errors and Ctrl-C)."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    install = Install(venv=venv, folder=folder, dists=tuple(dists))
    with _locked(venv):
        found = freeze(install, "found")
        install.stale = {n: v for n, v in found.items() if _is_narwhal(n)}
        _uninstall(install, list(install.stale), "pip uninstall (a stale narwhal install)")
        install.before = freeze(install, "before") if install.stale else found
        try:
            start = time.monotonic()
            output = "".join(
                _pip(
                    install,
                    ["install", *wheels.requirements(dists, extras or {})],
                    "pip install (our wheels)",
                )
            )
            install.install_wall_s = time.monotonic() - start
            install.resolver_notes = [
                line.strip() for line in output.splitlines() if _RESOLVER_NOTE.search(line)
            ]
            install.after = freeze(install, "after")
            yield install
        finally:
            start = time.monotonic()
            try:
                now = freeze(install, "before-cleanup")
                ours = [n for n in now if _is_narwhal(n) or n not in install.before]
                _uninstall(install, ours, "pip uninstall (ours and what the install added)")
                moved = [requirement(n, v) for n, v in install.before.items() if now.get(n) != v]
                if moved:
                    _pip(install, ["install", "--no-deps", *moved], "pip install (put back)")
                install.final = freeze(install, "final")
            except InstallError as exc:
                install.cleanup_error = str(exc)
            install.cleanup_wall_s = time.monotonic() - start
