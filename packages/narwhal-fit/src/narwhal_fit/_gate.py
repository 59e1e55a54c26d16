"""The seed's prefill gate: mean relative error <= 0.20 and worst point <= 0.50."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

from narwhal_fit._prefill import PrefillFit

__all__ = ["DEFAULT_MEAN_LIMIT", "DEFAULT_WORST_LIMIT", "GateVerdict", "gate_prefill"]

DEFAULT_MEAN_LIMIT: Final = 0.20
DEFAULT_WORST_LIMIT: Final = 0.50


@dataclass(frozen=True, slots=True)
class GateVerdict:
    """Outcome of a gate. ``reason`` is ``None`` when ``passed``, else one line naming each breach.

    ``worst_point`` is the fit's worst point (``(length,)`` for prefill), whether or not it failed.
    """

    passed: bool
    reason: str | None
    mean: float
    worst: float
    worst_point: tuple[float, ...]
    mean_limit: float
    worst_limit: float


def _check_limit(value: float, name: str) -> float:
    if isinstance(value, bool) or not math.isfinite(value) or value <= 0.0:
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return float(value)


def _pair(value: float, limit: float) -> tuple[str, str]:
    """Format value and limit with 2 decimals, or more when 2 would make them look equal."""
    for digits in range(2, 10):
        a, b = f"{value:.{digits}f}", f"{limit:.{digits}f}"
        if a != b:
            return a, b
    return repr(value), repr(limit)


def gate_prefill(
    fit: PrefillFit,
    *,
    mean_limit: float = DEFAULT_MEAN_LIMIT,
    worst_limit: float = DEFAULT_WORST_LIMIT,
) -> GateVerdict:
    """Gate ``fit``: it passes when mean <= ``mean_limit`` and worst <= ``worst_limit``.

    Reasons read e.g. ``prefill fit mean relative error 0.27 exceeds 0.20`` and
    ``prefill fit worst-point relative error 0.62 at 256 tokens exceeds 0.50``, joined by ``; ``.
    Limits must be finite and positive (``ValueError`` otherwise).
    """
    mean_limit = _check_limit(mean_limit, "mean_limit")
    worst_limit = _check_limit(worst_limit, "worst_limit")
    reasons: list[str] = []
    if fit.mean_rel_error > mean_limit:
        value, limit = _pair(fit.mean_rel_error, mean_limit)
        reasons.append(f"prefill fit mean relative error {value} exceeds {limit}")
    if fit.worst_rel_error > worst_limit:
        value, limit = _pair(fit.worst_rel_error, worst_limit)
        where = ", ".join(f"{v:g}" for v in fit.worst_point)
        reasons.append(
            f"prefill fit worst-point relative error {value} at {where} tokens exceeds {limit}"
        )
    return GateVerdict(
        passed=not reasons,
        reason="; ".join(reasons) if reasons else None,
        mean=fit.mean_rel_error,
        worst=fit.worst_rel_error,
        worst_point=fit.worst_point,
        mean_limit=mean_limit,
        worst_limit=worst_limit,
    )
