"""How well a stored fit describes its samples, and the bounds a decode fit is trusted within.

The seed gates only the prefill fit (narwhal-fit's ``gate_prefill``, at the format's
``FIT_MEAN_BOUND`` mean and ``FIT_WORST_BOUND`` worst-point relative error, ``_forms``). A decode
fit beyond the same figures is stored, but the profiler warns about it and ``load_trial.py check``
refuses it, so a bad decode fit never silently feeds a trial.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from narwhal_store._forms import FIT_MEAN_BOUND, FIT_WORST_BOUND
from narwhal_store._profiles import FitDoc

__all__ = [
    "BURSTY_SHARE",
    "DECODE_MEAN_BOUND",
    "DECODE_WORST_BOUND",
    "FitQuality",
    "decode_fit_suspect",
]

DECODE_MEAN_BOUND: Final = FIT_MEAN_BOUND
"""A decode fit whose mean relative error exceeds this (the prefill gate's figure) is suspect."""
DECODE_WORST_BOUND: Final = FIT_WORST_BOUND
"""A decode fit whose worst-point relative error exceeds this (the prefill gate's figure) is
suspect."""
BURSTY_SHARE: Final = 0.25
"""A decode cohort with at least this share of burst intervals in its window (the sidecar's
``burst_share``) was delivered in bursts: the engine's API server flushed several steps at once."""


@dataclass(frozen=True, slots=True)
class FitQuality:
    """A fit's mean and worst-point relative errors, and the point (x values) of the worst."""

    mean_rel_error: float
    worst_rel_error: float
    worst_point: tuple[float, ...]

    @classmethod
    def of(cls, doc: FitDoc) -> FitQuality | None:
        """The figures stored with ``doc`` (as narwhal-fit wrote them); None when absent."""
        extra = doc.model_extra or {}
        mean, worst, point = (
            extra.get(k) for k in ("mean_rel_error", "worst_rel_error", "worst_point")
        )
        if not isinstance(mean, int | float) or not isinstance(worst, int | float):
            return None
        where = tuple(float(v) for v in point) if isinstance(point, list) else ()
        return cls(float(mean), float(worst), where)

    def to_dict(self) -> dict[str, float | list[float]]:
        """``{"mean_rel_error", "worst_rel_error", "worst_point"}``."""
        return {
            "mean_rel_error": self.mean_rel_error,
            "worst_rel_error": self.worst_rel_error,
            "worst_point": list(self.worst_point),
        }


def decode_fit_suspect(quality: FitQuality) -> str | None:
    """Why a decode fit is beyond the bounds (``None`` when it is within both)."""
    reasons = []
    if quality.mean_rel_error > DECODE_MEAN_BOUND:
        reasons.append(
            f"mean relative error {quality.mean_rel_error:.1%} exceeds {DECODE_MEAN_BOUND:.0%}"
        )
    if quality.worst_rel_error > DECODE_WORST_BOUND:
        reasons.append(
            f"worst-point relative error {quality.worst_rel_error:.1%} exceeds "
            f"{DECODE_WORST_BOUND:.0%}"
        )
    return "; ".join(reasons) or None
