"""The decode form ``tpot-batch-context-v1``: ``tpot_s(n, ctx) = d0 + d1*n + d2*n*ctx``, all >= 0.

``n`` is the cohort's concurrency (streams decoding together) and ``ctx`` the mean context per
stream inside the measured window: input tokens + mean output position (see ``cohort_tpot``).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Final

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import ArrayLike, NDArray

from narwhal_fit._document import (
    check_keys,
    get_int,
    get_list,
    get_mapping,
    get_number,
    read_header,
    write_document,
)
from narwhal_fit._errors import FitError, InsufficientDataError
from narwhal_fit._inputs import positive_int, positive_time
from narwhal_fit._residuals import (
    PointResidual,
    check_predictions,
    check_summary,
    read_residuals,
    solve_relative,
    summarize,
)

__all__ = [
    "DECODE_COEFFICIENTS",
    "DECODE_FORM",
    "DecodeFit",
    "DecodePoint",
    "fit_decode",
    "tpot_batch_context_s",
]

DECODE_FORM: Final = "tpot-batch-context-v1"
"""Form name of the decode fit: ``tpot_s(n, ctx) = d0 + d1*n + d2*n*ctx``, coefficients >= 0."""

DECODE_COEFFICIENTS: Final = ("d0", "d1", "d2")
"""Its coefficients' names, in seconds: d0 (fixed), d1 (per stream), d2 (per stream and token)."""

FIT_VERSION: Final = 1
_X_NAMES: Final = ["concurrency", "ctx"]


def tpot_batch_context_s(
    coefficients: Mapping[str, float], concurrency: float, ctx: float
) -> float:
    """``d0 + d1*n + d2*n*ctx`` seconds for ``concurrency`` streams at mean context ``ctx`` (form
    ``tpot-batch-context-v1``; the one place its formula is written, for fits and documents)."""
    return float(_batch_context(coefficients, float(concurrency), float(ctx)))


def _batch_context(c: Mapping[str, float], n: Any, ctx: Any) -> Any:
    """The form's formula on floats or on numpy arrays of them (the one place it is written)."""
    return c["d0"] + c["d1"] * n + c["d2"] * n * ctx


@dataclass(frozen=True, slots=True)
class DecodePoint:
    """One decode cohort: ``concurrency`` streams, mean context ``ctx`` tokens, TPOT in seconds.

    ``input_len`` (optional) is the cohort's prompt length; when every point gives it, the fit's
    domain lists the distinct input lengths.
    """

    concurrency: int
    ctx: float
    tpot_s: float
    input_len: int | None = None


@dataclass(frozen=True, slots=True)
class DecodeFit:
    """A fitted ``tpot-batch-context-v1`` model (seconds).

    ``coefficients`` is ``{"d0", "d1", "d2"}``: seconds, seconds/stream, seconds/(stream*token).
    ``domain`` is ``{"concurrency": [...], "ctx_min", "ctx_max"}`` plus ``"input_lens"`` when
    the points carried them. ``residuals`` hold one entry per point with ``x = (n, ctx)``.
    """

    form: ClassVar[str] = DECODE_FORM

    coefficients: dict[str, float]
    domain: dict[str, Any]
    residuals: tuple[PointResidual, ...]
    mean_rel_error: float
    worst_rel_error: float
    worst_point: tuple[float, ...]

    def predict(self, concurrency: float, ctx: float) -> float:
        """Predicted TPOT in seconds for ``concurrency`` streams at mean context ``ctx`` tokens."""
        return tpot_batch_context_s(self.coefficients, concurrency, ctx)

    def predict_many(self, concurrency: ArrayLike, ctx: ArrayLike) -> NDArray[np.float64]:
        """Predicted TPOTs in seconds; ``concurrency`` and ``ctx`` broadcast against each other."""
        import numpy as np  # deferred: numpy loads with the first fit, not with the package

        n = np.asarray(concurrency, dtype=np.float64)
        x = np.asarray(ctx, dtype=np.float64)
        return np.asarray(_batch_context(self.coefficients, n, x), dtype=np.float64)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able dict (str, int, float, list, dict only); :meth:`from_dict` reads it."""
        domain: dict[str, Any] = {
            "concurrency": list(self.domain["concurrency"]),
            "ctx_min": self.domain["ctx_min"],
            "ctx_max": self.domain["ctx_max"],
        }
        if "input_lens" in self.domain:
            domain["input_lens"] = list(self.domain["input_lens"])
        return write_document(
            self,
            form=DECODE_FORM,
            fit_version=FIT_VERSION,
            x_names=_X_NAMES,
            coefficients=DECODE_COEFFICIENTS,
            domain=domain,
        )

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> DecodeFit:
        """Read a document written by :meth:`to_dict`; a malformed one raises :class:`FitError`."""
        where = "decode fit"
        coefficients = read_header(
            d,
            where,
            form=DECODE_FORM,
            fit_version=FIT_VERSION,
            x_names=_X_NAMES,
            coefficients=DECODE_COEFFICIENTS,
        )
        residuals = read_residuals(d, where, arity=2)
        raw_domain = get_mapping(d, "domain", where)
        check_keys(
            raw_domain,
            f"{where}.domain",
            required=("concurrency", "ctx_min", "ctx_max"),
            optional=("input_lens",),
        )
        input_lens: list[int] | None = None
        if "input_lens" in raw_domain:
            input_lens = [
                get_int(v, f"{where}.domain.input_lens[{i}]", minimum=1)
                for i, v in enumerate(get_list(raw_domain, "input_lens", f"{where}.domain"))
            ]
        domain = _domain([(int(r.x[0]), float(r.x[1])) for r in residuals], input_lens)
        for key in ("concurrency", "ctx_min", "ctx_max"):
            stored = raw_domain[key]
            if key != "concurrency":
                stored = get_number(stored, f"{where}.domain.{key}")
            if stored != domain[key]:
                raise FitError(
                    f"{where}.domain.{key}: {raw_domain[key]!r} disagrees with the residual points"
                    f" ({domain[key]!r})"
                )
        if input_lens is not None and input_lens != domain["input_lens"]:
            raise FitError(
                f"{where}.domain.input_lens: expected distinct ascending, got {input_lens}"
            )
        mean, worst, worst_point = check_summary(d, where, residuals)
        fit = cls(
            coefficients=coefficients,
            domain=domain,
            residuals=residuals,
            mean_rel_error=mean,
            worst_rel_error=worst,
            worst_point=worst_point,
        )
        check_predictions(residuals, lambda x: fit.predict(x[0], x[1]), where)
        return fit


def _domain(
    points: Sequence[tuple[int, float]], input_lens: Sequence[int] | None
) -> dict[str, Any]:
    if not points:
        raise FitError("decode fit: no points")
    ctxs = [ctx for _, ctx in points]
    domain: dict[str, Any] = {
        "concurrency": sorted({n for n, _ in points}),
        "ctx_min": min(ctxs),
        "ctx_max": max(ctxs),
    }
    if input_lens is not None:
        domain["input_lens"] = sorted(set(input_lens))
    return domain


def fit_decode(points: Sequence[DecodePoint]) -> DecodeFit:
    """Fit ``tpot-batch-context-v1`` to decode cohort points.

    Least squares on relative error (weights 1/y) with d0, d1, d2 >= 0 (NNLS, deterministic).
    Points keep their given order in the residuals; repeats of the same (n, ctx) are allowed.
    Needs at least two distinct concurrencies; every concurrency must be an integer >= 1, every
    ctx finite and >= 0, every TPOT finite and positive, otherwise
    :class:`InsufficientDataError` names the value.
    """
    ns: list[int] = []
    ctxs: list[float] = []
    ys: list[float] = []
    lens: list[int] = []
    for i, p in enumerate(points):
        ns.append(positive_int(p.concurrency, f"decode point[{i}].concurrency"))
        ctx: object = p.ctx  # typed float, but checked: callers pass what they measured
        if isinstance(ctx, bool) or not isinstance(ctx, numbers.Real):
            raise InsufficientDataError(f"decode point[{i}].ctx must be a number, got {ctx!r}")
        if not math.isfinite(ctx) or float(ctx) < 0:
            raise InsufficientDataError(
                f"decode point[{i}].ctx must be finite and >= 0, got {ctx!r}"
            )
        ctxs.append(float(ctx))
        ys.append(positive_time(p.tpot_s, f"decode point[{i}].tpot_s (n={p.concurrency})"))
        if p.input_len is not None:
            lens.append(positive_int(p.input_len, f"decode point[{i}].input_len"))
    if len(set(ns)) < 2:
        raise InsufficientDataError(
            "a decode fit needs points at two or more distinct concurrencies, "
            f"got {sorted(set(ns))}"
        )
    import numpy as np  # deferred: numpy loads with the first fit, not with the package

    n = np.array(ns, dtype=np.float64)
    x = np.array(ctxs, dtype=np.float64)
    y = np.array(ys, dtype=np.float64)
    design = np.column_stack([np.ones_like(n), n, n * x])
    xs = list(zip(ns, ctxs, strict=True))
    coefficients, residuals = solve_relative(design, y, DECODE_COEFFICIENTS, xs)
    mean, worst, worst_point = summarize(residuals)
    all_lens = lens if len(lens) == len(ns) else None
    return DecodeFit(
        coefficients=coefficients,
        domain=_domain(xs, all_lens),
        residuals=residuals,
        mean_rel_error=mean,
        worst_rel_error=worst,
        worst_point=worst_point,
    )
