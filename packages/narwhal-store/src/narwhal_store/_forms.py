"""The fit forms a profile store holds, as the format defines them: their names, their
coefficients' names, their formulas (to evaluate a stored fit) and the relative-error bounds a
fit is trusted within.

narwhal-fit fits these forms and keeps its own copy of the same facts; a workspace test keeps the
two equal, so reading a store needs neither narwhal-fit nor its numerical libraries.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

__all__ = [
    "DECODE_COEFFICIENTS",
    "DECODE_FORM",
    "FIT_MEAN_BOUND",
    "FIT_WORST_BOUND",
    "MIXING_COEFFICIENTS",
    "MIXING_FORM",
    "PREFILL_COEFFICIENTS",
    "PREFILL_FORM",
    "tpot_batch_context_s",
    "ttft_quadratic_s",
]

PREFILL_FORM: Final = "ttft-quadratic-v1"
"""The prefill fit: ``ttft_s(L) = a + b*L + c*L**2``, coefficients >= 0."""
PREFILL_COEFFICIENTS: Final = ("a", "b", "c")

DECODE_FORM: Final = "tpot-batch-context-v1"
"""The decode fit: ``tpot_s(n, ctx) = d0 + d1*n + d2*n*ctx``, coefficients >= 0."""
DECODE_COEFFICIENTS: Final = ("d0", "d1", "d2")

MIXING_FORM: Final = "mixing-share-step-v1"
"""The mixing fit: ``loss_s = share*work_s + step_s*chunks``, coefficients >= 0."""
MIXING_COEFFICIENTS: Final = ("share", "step_s")

FIT_MEAN_BOUND: Final = 0.20
"""The mean relative error a fit is trusted within (the prefill gate's)."""
FIT_WORST_BOUND: Final = 0.50
"""The worst-point relative error a fit is trusted within (the prefill gate's)."""


def ttft_quadratic_s(coefficients: Mapping[str, float], length: float) -> float:
    """``a + b*L + c*L**2`` seconds for a prompt of ``length`` tokens."""
    c = coefficients
    x = float(length)
    return c["a"] + c["b"] * x + c["c"] * x * x


def tpot_batch_context_s(
    coefficients: Mapping[str, float], concurrency: float, ctx: float
) -> float:
    """``d0 + d1*n + d2*n*ctx`` seconds for ``concurrency`` streams at mean context ``ctx``."""
    c = coefficients
    n = float(concurrency)
    return c["d0"] + c["d1"] * n + c["d2"] * n * float(ctx)
