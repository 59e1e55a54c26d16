"""The exceptions of narwhal_report; each carries the exit code the command turns it into.

ReportError          root; exit 1: a blocking error (the figures could not be drawn, the file not
│                    written)
└── ReportUsageError exit 2: bad input: a missing path, a path that is neither a profile store, a
                     freshness probe, a trial run folder nor an edge folder, an unreadable store,
                     probe, run or edge folder, an unusable --out or --fleet, --replications out
                     of range, a path under a folder that cannot be entered
"""

from __future__ import annotations


class ReportError(Exception):
    """Root of every error of narwhal_report; ``exit_code`` is what the command exits with."""

    exit_code: int = 1

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ReportUsageError(ReportError):
    """Bad input (exit 2)."""

    exit_code = 2
