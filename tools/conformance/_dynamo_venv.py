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

import os
from pathlib import Path
from typing import IO

from ._venv import InstallError, VenvReport, ensure_marked, probe_versions, step, tail

DYNAMO_VERSION = "1.6.1"
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


def default_dynamo_venv() -> Path:
    """``$NARWHAL_DYNAMO_VENV``, else ``~/.cache/narwhal-conformance/dynamo-1.6.1``."""
    configured = os.environ.get(ENV_VAR, "").strip()
    if configured:
        return Path(configured).expanduser().absolute()
    return Path.home() / ".cache" / "narwhal-conformance" / f"dynamo-{DYNAMO_VERSION}"


def _install(pip: list[str], out: IO[str], log: Path) -> None:
    runtime = f"ai-dynamo-runtime=={DYNAMO_VERSION}"
    step([*pip, "install", runtime], out, log, f"pip install {runtime}")
    dynamo = f"ai-dynamo=={DYNAMO_VERSION}"
    step([*pip, "install", "--no-deps", dynamo], out, log, f"pip install {dynamo}")
    step([*pip, "install", *DEPS], out, log, "pip install (the frontend's dependencies)")


def ensure_dynamo_venv(folder: Path, log: Path) -> VenvReport:
    """Reuse the venv at ``folder`` when its marker says it is complete, else install it."""
    return ensure_marked(
        folder,
        log,
        env_var=ENV_VAR,
        install=_install,
        check=_check,
        marker_doc={"dynamo": DYNAMO_VERSION},
    )


def _check(folder: Path, log: Path) -> dict[str, str | None]:
    try:
        versions = probe_versions(folder, _PROBE, 300, f"import {', '.join(IMPORTS)}")
    except InstallError as exc:
        raise InstallError(f"{exc}\nlog tail:\n{tail(log)}") from exc
    problems = [
        f"{name} is {versions.get(name)}, not {DYNAMO_VERSION}"
        for name in ("ai-dynamo", "ai-dynamo-runtime")
        if versions.get(name) != DYNAMO_VERSION
    ]
    if problems:
        raise InstallError(f"{folder}: " + "; ".join(problems) + f"\nlog tail:\n{tail(log)}")
    return versions
