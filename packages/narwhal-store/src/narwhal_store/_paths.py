"""File names: the sidecar beside a store, and the pending sidecar used while a write commits."""

from __future__ import annotations

from pathlib import Path

__all__ = ["PENDING_SUFFIX", "pending_sidecar_name", "sidecar_path"]

PENDING_SUFFIX = ".pending"
_PENDING_DIGEST_CHARS = 16


def sidecar_path(store_path: str | Path) -> Path:
    """The store path with its suffix replaced by ``.samples.json``.

    ``profiles/fleet-profiles.json`` → ``profiles/fleet-profiles.samples.json``; a name without a
    suffix gets ``.samples.json`` appended.
    """
    return Path(store_path).with_suffix(".samples.json")


def pending_sidecar_name(sidecar_name: str, sidecar_sha256: str) -> str:
    """Hidden name under which a new sidecar waits until its store is committed.

    ``.fleet-profiles.samples.json.<first 16 hex of its SHA-256>.pending``: content-addressed, so a
    reader holding the store's recorded SHA-256 can find it.
    """
    return f".{sidecar_name}.{sidecar_sha256[:_PENDING_DIGEST_CHARS]}{PENDING_SUFFIX}"
