"""Throwaway virtual environments for the peer load generators (never project dependencies).

Each peer gets ``.bench-venvs/<name>/`` (git-ignored), made with ``python3 -m venv`` and filled
with pip from the package index. A venv whose marker file names the same requirements is reused.
guidellm needs torch: ``torch==2.13.0`` is installed first so pip takes the CPU wheel (no CUDA
download). A failed install makes that peer skipped, with the pip log named.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

MARKER = ".narwhal-bench-installed"


@dataclass(frozen=True, slots=True)
class Peer:
    """A peer load generator: its venv name, the pip install steps, and its console script."""

    name: str
    steps: tuple[tuple[str, ...], ...]
    script: str


PEERS: dict[str, Peer] = {
    "aiperf": Peer("aiperf", (("aiperf==0.13.0", "tokenizers"),), "aiperf"),
    "guidellm": Peer(
        "guidellm", (("torch==2.13.0",), ("guidellm==0.8.1", "tokenizers")), "guidellm"
    ),
}


@dataclass(frozen=True, slots=True)
class Venv:
    """An installed peer: its interpreter and console script."""

    python: Path
    script: Path


def _base_python() -> str:
    return shutil.which("python3") or sys.executable


def _spec(peer: Peer) -> str:
    return "\n".join(" ".join(step) for step in peer.steps) + "\n"


def ensure(peer: Peer, root: Path, *, log: Path) -> Venv:
    """The peer's venv under ``root``, installed now unless a matching one exists.

    Raises RuntimeError with a one-line reason (the log has pip's output) when it cannot be
    installed.
    """
    folder = root / peer.name
    python = folder / "bin" / "python"
    script = folder / "bin" / peer.script
    marker = folder / MARKER
    if marker.is_file() and marker.read_text() == _spec(peer) and script.exists():
        return Venv(python, script)
    if folder.exists():
        shutil.rmtree(folder)
    root.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as out:
        steps: list[list[str]] = [[_base_python(), "-m", "venv", str(folder)]]
        for reqs in peer.steps:
            steps.append([str(python), "-m", "pip", "install", "--quiet", *reqs])
        for argv in steps:
            out.write(("$ " + " ".join(argv) + "\n").encode())
            out.flush()
            code = subprocess.call(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out)
            if code != 0:
                raise RuntimeError(f"`{' '.join(argv[-2:])}` failed (exit {code}); see {log}")
    if not script.exists():
        raise RuntimeError(f"{peer.script} is missing after the install; see {log}")
    marker.write_text(_spec(peer))
    return Venv(python, script)
