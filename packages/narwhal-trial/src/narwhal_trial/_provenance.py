"""What the manifest records about the helper itself: its digest, versions and source revision.

The helper is every installed narwhal package whose code runs during a trial: ``narwhal-trial`` and
the narwhal distributions it requires, transitively (``narwhal-engine-client``, which times every
request and enforces the send deadline, and ``narwhal-store``, which writes the records), found
from the installed distributions' metadata, so a new dependency is covered without a list to keep.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from narwhal_store import canonical_json, sha256_hex

PACKAGE_DIR = Path(__file__).resolve().parent
HELPER_DIST = "narwhal-trial"
_PREFIX = "narwhal-"
_REQUIREMENT = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


@dataclass(frozen=True, slots=True)
class HelperPackage:
    """One installed narwhal package the helper digest covers."""

    dist: str
    """distribution name (``narwhal-engine-client``)"""
    module: str
    """import name (``narwhal_engine_client``): the prefix of its ``helper_files`` keys"""
    version: str
    path: Path
    """the package folder whose ``*.py`` files are digested"""


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def narwhal_requirements(dist: str) -> list[str]:
    """The narwhal distributions ``dist`` requires (not for an extra), as normalized names."""
    try:
        requires = metadata.requires(dist) or []
    except metadata.PackageNotFoundError:
        return []
    found = []
    for line in requires:
        match = _REQUIREMENT.match(line)
        if match is None or "extra" in line.partition(";")[2]:
            continue
        name = _normalized(match.group(1))
        if name.startswith(_PREFIX):
            found.append(name)
    return found


def helper_dists(root: str = HELPER_DIST) -> list[str]:
    """``root`` and every narwhal distribution it requires, transitively; sorted."""
    seen = {root}
    todo = [root]
    while todo:
        for name in narwhal_requirements(todo.pop()):
            if name not in seen:
                seen.add(name)
                todo.append(name)
    return sorted(seen)


def helper_packages(root: str = HELPER_DIST) -> list[HelperPackage]:
    """The installed packages of ``helper_dists``: where the code the interpreter imports lives
    (a package shadowed on ``PYTHONPATH`` is digested where it is imported from)."""
    packages = []
    for dist in helper_dists(root):
        module = dist.replace("-", "_")
        where = importlib.import_module(module).__file__
        if where is None:  # a namespace package: no code of its own to digest
            continue
        packages.append(
            HelperPackage(dist, module, dist_version(dist), Path(where).resolve().parent)
        )
    return packages


def helper_files(
    launcher: Path | None, packages: Sequence[HelperPackage] | None = None
) -> dict[str, str]:
    """SHA-256 of every file the helper runs: each helper package's ``*.py`` sources (default:
    ``helper_packages()``) and the launcher.

    Keys are ``<module>/<relative path>`` (``narwhal_trial/run/_trial.py``,
    ``narwhal_engine_client/...``) and ``launcher/<file name>``.
    """
    files: dict[str, str] = {}
    for package in helper_packages() if packages is None else packages:
        for path in sorted(package.path.rglob("*.py")):
            key = f"{package.module}/{path.relative_to(package.path).as_posix()}"
            files[key] = _sha256_file(path)
    if launcher is not None:
        files[f"launcher/{launcher.name}"] = _sha256_file(launcher)
    return files


def helper_digest(files: dict[str, str]) -> str:
    """SHA-256 of the canonical JSON of ``helper_files`` (sorted keys, compact, ASCII)."""
    return sha256_hex(canonical_json(files))


def dist_version(name: str) -> str:
    """The installed version of a distribution, or ``unknown``."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "unknown"


def source_revision(where: Path = PACKAGE_DIR) -> tuple[str, bool | None]:
    """``git rev-parse HEAD`` of the checkout holding ``where`` and whether it has local changes.

    ``("unknown", None)`` when git or the checkout is not available.
    """
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0"}
    try:
        head = subprocess.run(
            ["git", "-C", str(where), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
            env=env,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ("unknown", None)
    try:
        status = subprocess.run(
            ["git", "-C", str(where), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
            env=env,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return (head or "unknown", None)
    return (head or "unknown", bool(status.strip()))


def _sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
