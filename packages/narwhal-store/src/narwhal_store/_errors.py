"""Errors raised by narwhal-store.

StoreError                       root of every error this library raises
├── FormatError (also ValueError) a file is unreadable, not JSON, or violates its format; names the
│                                 file and the JSON path of the bad value
├── DestinationError             a write destination is unusable: a symlink, a symlinked
│                                 folder, an existing file in "fresh" mode, not a regular file
├── IntegrityError               a store and its sidecar disagree: sidecar missing, SHA-256
│                                 mismatch, a profile whose samples digest does not match
├── MergeError                   stores cannot be merged: too few inputs, duplicate keys, an
│                                 engine not covered or not in the fleet, unmatched evidence
└── PathAccessError              a path cannot be looked at: a folder on its way cannot be
                                  entered (``reason`` is the message without the path)
"""

from __future__ import annotations

from pathlib import Path

__all__ = [
    "DestinationError",
    "FormatError",
    "IntegrityError",
    "MergeError",
    "PathAccessError",
    "StoreError",
]


class StoreError(Exception):
    """Root of every error narwhal-store raises."""


class FormatError(StoreError, ValueError):
    """A file is unreadable, not JSON, or violates its format.

    ``str()`` reads ``fleet.json: engines[1].role: Input should be ...``; ``json_path`` is empty
    when the problem concerns the whole file.
    """

    def __init__(self, path: str | Path, json_path: str, message: str) -> None:
        self.path = str(path)
        self.json_path = json_path
        self.message = message
        where = f"{self.path}: {json_path}" if json_path else self.path
        super().__init__(f"{where}: {message}")


class DestinationError(StoreError):
    """A write destination is unusable (symlink, existing file in fresh mode, bad folder)."""


class IntegrityError(StoreError):
    """A store and its sidecar do not match (sidecar missing, SHA-256 or samples mismatch)."""


class MergeError(StoreError):
    """Stores cannot be merged (too few inputs, duplicate keys, missing engines, bad evidence)."""


class PathAccessError(StoreError):
    """A path cannot be looked at (a folder on its way cannot be entered, a name too long).

    ``str()`` reads ``PATH: cannot look there (Permission denied: a folder on its way cannot be
    entered)``; ``reason`` is the part after the path, for a caller naming it its own way.
    """

    def __init__(self, path: Path, exc: OSError) -> None:
        self.path = path
        hint = ": a folder on its way cannot be entered" if isinstance(exc, PermissionError) else ""
        self.reason = f"cannot look there ({exc.strerror or exc}{hint})"
        super().__init__(f"{path}: {self.reason}")
