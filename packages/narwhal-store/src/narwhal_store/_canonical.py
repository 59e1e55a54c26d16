"""Canonical JSON and SHA-256 helpers (byte-identical to narwhal-engine-client's copy)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

__all__ = ["canonical_json", "sha256_file", "sha256_hex"]

_CHUNK = 1 << 20


def canonical_json(obj: Any) -> bytes:
    """Canonical JSON bytes: sorted keys, no whitespace, ASCII only, NaN and infinities refused.

    Exactly ``json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
    allow_nan=False).encode("ascii")``; raises ``ValueError`` for non-finite floats and
    ``TypeError`` for values JSON cannot hold.
    """
    return json.dumps(
        obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False
    ).encode("ascii")


def sha256_hex(data: bytes) -> str:
    """Lowercase hex SHA-256 digest of ``data``."""
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: str | Path) -> str:
    """Lowercase hex SHA-256 digest of a file's bytes (read in chunks)."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()
