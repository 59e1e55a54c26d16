"""Errors of the ``narwhal-profile`` command, each carrying its exit code (docs/design.md §8).

ProfileError                 root; exit 1 unless a subclass says otherwise
├── ProfileUsageError        exit 2: bad option values, conflicting modes, bad fleet/limits,
│                            unusable destinations
├── ProfileAbortError        exit 1: a measurement abort (the reference's six conditions,
│                            evidence changes, ...)
└── ProfileInterrupted       exit 130: Ctrl-C; finished profiles were kept
"""

from __future__ import annotations


class ProfileError(Exception):
    """Root of every error the command turns into an exit code and a one-line message."""

    exit_code: int = 1
    code: str = "runtime_error"

    def __init__(self, message: str, *, engine: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.engine = engine
        if code is not None:
            self.code = code


class ProfileUsageError(ProfileError):
    """Invalid usage or input: exit 2."""

    exit_code = 2
    code = "usage"


class ProfileAbortError(ProfileError):
    """A measurement abort: exit 1."""

    exit_code = 1
    code = "abort"


class ProfileInterrupted(ProfileError):
    """Interrupted by the operator: exit 130."""

    exit_code = 130
    code = "interrupted"
