"""narwhal_fit: latency models for LLM inference engines.

Three fit forms, all least squares on relative error (weights 1/y) with non-negative
coefficients, solved by NNLS:

* ``ttft-quadratic-v1`` (:func:`fit_prefill`): ``ttft_s(L) = a + b*L + c*L**2`` on per-length
  median TTFTs, checked by :func:`gate_prefill` (mean <= 0.20, worst point <= 0.50).
* ``tpot-batch-context-v1`` (:func:`fit_decode`): ``tpot_s(n, ctx) = d0 + d1*n + d2*n*ctx`` on
  decode cohort points built with :func:`decode_window` and :func:`cohort_tpot`.
* ``mixing-share-step-v1`` (:func:`fit_mixing`): ``loss_s = share*work_s + step_s*chunks``, the
  decode time one prefill costs running streams, on mixing points whose loss
  :func:`mixing_loss` measures (weights ``1/max(y, floor)``, the floor a tenth of the largest
  loss and at least ``MIXING_FLOOR_S``: a loss may be <= 0; :func:`mixing_floor_s`).

Fits round-trip through plain dicts (``to_dict``/``from_dict``/:func:`load_fit`). Depends on
numpy and scipy only; scipy is imported at the first fit, not with the package.
"""

from narwhal_fit._bursts import BURST_FRACTION, burst_share
from narwhal_fit._decode import (
    DECODE_COEFFICIENTS,
    DECODE_FORM,
    DecodeFit,
    DecodePoint,
    fit_decode,
    tpot_batch_context_s,
)
from narwhal_fit._errors import (
    FitConvergenceError,
    FitError,
    InsufficientDataError,
    NeedsMoreTokensError,
)
from narwhal_fit._gate import DEFAULT_MEAN_LIMIT, DEFAULT_WORST_LIMIT, GateVerdict, gate_prefill
from narwhal_fit._mixing import (
    MIXING_COEFFICIENTS,
    MIXING_FLOOR_S,
    MIXING_FORM,
    MIXING_RELATIVE_FLOOR,
    MIXING_WEIGHTS,
    MixingFit,
    MixingPoint,
    fit_mixing,
    mixing_floor_s,
    mixing_loss_s,
    prefill_chunks,
    prefill_work_s,
)
from narwhal_fit._mixing_loss import MixingLoss, mixing_loss
from narwhal_fit._prefill import (
    PREFILL_COEFFICIENTS,
    PREFILL_FORM,
    PrefillFit,
    fit_prefill,
    median_by_length,
    ttft_quadratic_s,
)
from narwhal_fit._registry import FORMS, load_fit
from narwhal_fit._residuals import PointResidual
from narwhal_fit._weighted import WEIGHTS
from narwhal_fit._window import (
    CohortTpot,
    DecodeWindow,
    StreamTimes,
    cohort_tpot,
    decode_window,
    expand_chunks,
)

__all__ = [
    "BURST_FRACTION",
    "DECODE_COEFFICIENTS",
    "DECODE_FORM",
    "DEFAULT_MEAN_LIMIT",
    "DEFAULT_WORST_LIMIT",
    "FORMS",
    "MIXING_COEFFICIENTS",
    "MIXING_FLOOR_S",
    "MIXING_FORM",
    "MIXING_RELATIVE_FLOOR",
    "MIXING_WEIGHTS",
    "PREFILL_COEFFICIENTS",
    "PREFILL_FORM",
    "WEIGHTS",
    "CohortTpot",
    "DecodeFit",
    "DecodePoint",
    "DecodeWindow",
    "FitConvergenceError",
    "FitError",
    "GateVerdict",
    "InsufficientDataError",
    "MixingFit",
    "MixingLoss",
    "MixingPoint",
    "NeedsMoreTokensError",
    "PointResidual",
    "PrefillFit",
    "StreamTimes",
    "burst_share",
    "cohort_tpot",
    "decode_window",
    "expand_chunks",
    "fit_decode",
    "fit_mixing",
    "fit_prefill",
    "gate_prefill",
    "load_fit",
    "median_by_length",
    "mixing_floor_s",
    "mixing_loss",
    "mixing_loss_s",
    "prefill_chunks",
    "prefill_work_s",
    "tpot_batch_context_s",
    "ttft_quadratic_s",
]
