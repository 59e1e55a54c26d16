"""Validation of measured inputs before a fit: every failure names the offending value."""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

from narwhal_fit._errors import InsufficientDataError

__all__ = ["positive_int", "positive_time", "positive_times"]


def positive_int(value: Any, what: str) -> int:
    """Return ``value`` when it is an integer >= 1 (bools and integral floats refused)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InsufficientDataError(f"{what} must be a positive integer, got {value!r}")
    if value < 1:
        raise InsufficientDataError(f"{what} must be a positive integer, got {value!r}")
    return int(value)


def finite_time(value: Any, what: str, *, minimum: float | None = None) -> float:
    """Return ``value`` as a float when it is a finite number (at least ``minimum`` if given)."""
    number = _seconds(value, what)
    if not math.isfinite(number) or (minimum is not None and number < minimum):
        bound = "finite" if minimum is None else f"finite and >= {minimum:g}"
        raise InsufficientDataError(f"{what} must be {bound}, got {value!r}")
    return number


def positive_time(value: Any, what: str) -> float:
    """Return ``value`` as a float when it is a finite number > 0."""
    number = _seconds(value, what)
    if not math.isfinite(number) or number <= 0.0:
        raise InsufficientDataError(f"{what} must be finite and positive, got {value!r}")
    return number


def _seconds(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InsufficientDataError(f"{what} must be a number of seconds, got {value!r}")
    return float(value)


def positive_times(values: Sequence[Any], what: str) -> NDArray[np.float64]:
    """Validate every value with :func:`positive_time` and return them as a float64 array."""
    import numpy as np  # deferred: numpy loads with the first fit, not with the package

    return np.array(
        [positive_time(v, f"{what}[{i}]") for i, v in enumerate(values)], dtype=np.float64
    )
