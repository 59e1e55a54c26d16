"""The throwaway venv that holds NVIDIA Dynamo 1.6.1 (frontend, mocker), installed once and reused.

``ensure_dynamo_venv(folder)`` installs it from the package index when no completion marker is
there: ``python3 -m venv``, ``pip install ai-dynamo-runtime==1.6.1`` (the Rust runtime wheel), then
``pip install --no-deps ai-dynamo==1.6.1`` (its pin on ``aisimulate`` would download from outside
the index), then by name the packages the frontend and the mocker import at start-up (``DEPS``).
It checks that both versions landed and that ``dynamo.frontend`` and ``dynamo.mocker`` import, and
only then writes the marker. A folder with a marker is reused after the same check. Every failure
raises ``InstallError`` with the reason and the tail of the pip log; nothing is ever skipped.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from ._venv import InstallError, _step, _system_python, tail

DYNAMO_VERSION = "1.6.1"
MARKER = "narwhal-conformance-install.json"
ENV_VAR = "NARWHAL_DYNAMO_VENV"
#: What ``ai-dynamo``'s frontend and mocker import, installed by name (``--no-deps`` above).
DEPS = (
    "aiohttp",
    "msgspec",
    "prometheus-client",
    "pyzmq",
    "tqdm",
    "zstandard",
    "packaging",
    "pyyaml",
)
#: The modules whose import proves the install usable.
IMPORTS = ("dynamo.frontend", "dynamo.mocker")

_PROBE = f"""
import importlib, importlib.metadata as md, json, sys
out = {{"python": sys.version.split()[0]}}
for name in ("ai-dynamo", "ai-dynamo-runtime", *{DEPS!r}):
    try:
        out[name] = md.version(name)
    except md.PackageNotFoundError:
        out[name] = None
for module in {IMPORTS!r}:
    importlib.import_module(module)
print(json.dumps(out))
"""


@dataclass(frozen=True)
class DynamoVenvReport:
    """What ``ensure_dynamo_venv`` did and how long it took."""

    folder: Path
    installed: bool
    wall_s: float
    versions: dict[str, str | None]

    @property
    def python(self) -> Path:
        """The venv's interpreter."""
        return self.folder / "bin" / "python"


def default_dynamo_venv() -> Path:
    """``$NARWHAL_DYNAMO_VENV``, else ``~/.cache/narwhal-conformance/dynamo-1.6.1``."""
    configured = os.environ.get(ENV_VAR, "").strip()
    if configured:
        return Path(configured).expanduser().absolute()
    return Path.home() / ".cache" / "narwhal-conformance" / f"dynamo-{DYNAMO_VERSION}"


def ensure_dynamo_venv(folder: Path, log: Path) -> DynamoVenvReport:
    """Reuse the venv at ``folder`` when its marker says it is complete, else install it."""
    start = time.monotonic()
    marker = folder / MARKER
    if marker.is_file():
        versions = _check(folder, log)
        return DynamoVenvReport(folder, False, time.monotonic() - start, versions)
    if folder.exists() and not (folder / "pyvenv.cfg").is_file():
        raise InstallError(f"{folder} exists and is not a venv; remove it or set {ENV_VAR}")
    fresh = not folder.exists()
    folder.parent.mkdir(parents=True, exist_ok=True)
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a", encoding="utf-8") as out:
        if not (folder / "pyvenv.cfg").is_file():
            _step([_system_python(), "-m", "venv", str(folder)], out, log, "python3 -m venv")
        pip = [str(folder / "bin" / "python"), "-m", "pip", "--disable-pip-version-check"]
        # An interrupted install (no marker) is completed in place: pip only adds what is missing.
        runtime = f"ai-dynamo-runtime=={DYNAMO_VERSION}"
        _step([*pip, "install", runtime], out, log, f"pip install {runtime}")
        dynamo = f"ai-dynamo=={DYNAMO_VERSION}"
        _step([*pip, "install", "--no-deps", dynamo], out, log, f"pip install {dynamo}")
        _step([*pip, "install", *DEPS], out, log, "pip install (the frontend's dependencies)")
    versions = _check(folder, log)
    wall = time.monotonic() - start
    doc = {
        "dynamo": DYNAMO_VERSION,
        "versions": versions,
        "install_wall_s": round(wall, 1),
        "from_scratch": fresh,
        "completed": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    tmp = marker.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    tmp.replace(marker)
    return DynamoVenvReport(folder, True, wall, versions)


def _check(folder: Path, log: Path) -> dict[str, str | None]:
    python = folder / "bin" / "python"
    if not python.is_file():
        raise InstallError(f"{python} is missing; remove {folder} to reinstall")
    try:
        done = subprocess.run(
            [str(python), "-c", _PROBE],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InstallError(f"{python} cannot run: {exc}") from exc
    if done.returncode != 0:
        raise InstallError(
            f"{python} cannot import {', '.join(IMPORTS)}: {done.stderr.strip()[-2000:]}"
            f"\nlog tail:\n{tail(log)}"
        )
    versions: dict[str, str | None] = json.loads(done.stdout.strip().splitlines()[-1])
    problems = [
        f"{name} is {versions.get(name)}, not {DYNAMO_VERSION}"
        for name in ("ai-dynamo", "ai-dynamo-runtime")
        if versions.get(name) != DYNAMO_VERSION
    ]
    if problems:
        raise InstallError(f"{folder}: " + "; ".join(problems) + f"\nlog tail:\n{tail(log)}")
    return versions
