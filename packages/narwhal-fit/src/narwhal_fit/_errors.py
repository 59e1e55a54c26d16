"""Exceptions raised by narwhal_fit.

Every exception the library raises on purpose derives from :class:`FitError`::

    FitError
    ├── InsufficientDataError   (also ValueError)   too few points, or values no fit can use
    ├── FitConvergenceError     (also RuntimeError) the solver failed or gave non-finite output
    └── NeedsMoreTokensError                        a decode cohort's window is too short

A malformed fit document (``from_dict``/``load_fit``) raises :class:`FitError` itself, naming the
offending key. Invalid gate limits raise a plain :class:`ValueError` (a programming error).
"""

from __future__ import annotations

__all__ = ["FitConvergenceError", "FitError", "InsufficientDataError", "NeedsMoreTokensError"]


class FitError(Exception):
    """Root of every error narwhal_fit raises on purpose."""


class InsufficientDataError(FitError, ValueError):
    """The input cannot support the computation: too few distinct points or unusable values."""


class FitConvergenceError(FitError, RuntimeError):
    """The least-squares solver did not converge or returned non-finite coefficients."""


class NeedsMoreTokensError(FitError):
    """A decode cohort's overlap window holds fewer than two intervals for some stream.

    The message tells the operator to raise ``--decode-tokens`` and gives the counts.
    """

    def __init__(
        self,
        message: str,
        *,
        min_intervals: int,
        stream_index: int,
        streams: int,
        tokens_per_stream: tuple[int, ...],
    ) -> None:
        super().__init__(message)
        self.min_intervals = min_intervals
        self.stream_index = stream_index
        self.streams = streams
        self.tokens_per_stream = tokens_per_stream
