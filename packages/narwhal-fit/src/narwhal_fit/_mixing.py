"""The mixing form ``mixing-share-step-v1``: how much of a prefill's time lands on running decodes.

While an engine prefills a prompt of ``L`` tokens, the streams it is decoding lose

``loss_s(L) = share·(b·L + c·L²) + step_s·chunks(L)``

where ``b·L + c·L²`` is the prefill fit's on-device time of the prompt (``ttft-quadratic-v1``
without its intercept) and ``chunks(L) = ⌈L / max_num_batched_tokens⌉`` the steps it spans
(1 with chunked prefill off). A scheduler that puts the prefill chunk and the decode tokens in one
step (vLLM's chunked prefill) has ``share ≈ 1`` and ``step_s ≈ 0``; one whose prefill steps and
decode steps take turns pays a whole step's fixed cost per chunk (``step_s ≈ d0``); one that runs
prefills beside its decodes has ``share < 1``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Final

__all__ = ["MIXING_COEFFICIENTS", "MIXING_FORM", "mixing_loss_s", "prefill_chunks"]

MIXING_FORM: Final = "mixing-share-step-v1"
"""Form name of the mixing fit: ``loss_s = share·work_s + step_s·chunks``, coefficients >= 0."""

MIXING_COEFFICIENTS: Final = ("share", "step_s")
"""Its coefficients: share (of the prefill's on-device time, no unit) and step_s (s per chunk)."""


def prefill_chunks(length: int, budget: int | None) -> int:
    """Steps a prompt of ``length`` tokens spans under a per-step budget (None: one step)."""
    if budget is None:
        return 1
    return max(1, math.ceil(length / budget))


def mixing_loss_s(coefficients: Mapping[str, float], work_s: float, chunks: int) -> float:
    """Decode time lost to one prefill of on-device time ``work_s`` spanning ``chunks`` steps."""
    return coefficients["share"] * work_s + coefficients["step_s"] * chunks
