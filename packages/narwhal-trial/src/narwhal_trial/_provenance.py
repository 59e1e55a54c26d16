"""What the manifest records about the helper itself: its digest, version and source revision."""

from __future__ import annotations

import hashlib
import os
import subprocess
from importlib import metadata
from pathlib import Path

from narwhal_engine_client import canonical_json, sha256_hex

PACKAGE_DIR = Path(__file__).resolve().parent


def helper_files(launcher: Path | None) -> dict[str, str]:
    """SHA-256 of every file the helper runs: the package's ``*.py`` sources and the launcher.

    Keys are ``narwhal_trial/<relative path>`` and ``launcher/<file name>``.
    """
    files = {
        f"narwhal_trial/{path.relative_to(PACKAGE_DIR).as_posix()}": _sha256_file(path)
        for path in sorted(PACKAGE_DIR.rglob("*.py"))
    }
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
