"""The prefill form ``ttft-quadratic-v1``: ``ttft_s(L) = a + b*L + c*L**2`` with a, b, c >= 0."""

from __future__ import annotations

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
    read_header,
    write_document,
)
from narwhal_fit._errors import FitError, InsufficientDataError
from narwhal_fit._inputs import positive_int, positive_time, positive_times
from narwhal_fit._residuals import (
    PointResidual,
    check_predictions,
    check_summary,
    read_residuals,
    solve_relative,
    summarize,
)

__all__ = [
    "PREFILL_COEFFICIENTS",
    "PREFILL_FORM",
    "PrefillFit",
    "fit_prefill",
    "median_by_length",
    "ttft_quadratic_s",
]

PREFILL_FORM: Final = "ttft-quadratic-v1"
"""Form name of the prefill fit: ``ttft_s(L) = a + b*L + c*L**2``, coefficients >= 0."""

PREFILL_COEFFICIENTS: Final = ("a", "b", "c")
"""Its coefficients' names, in seconds: a (fixed), b (per token), c (per token squared)."""

FIT_VERSION: Final = 1
_MIN_LENGTHS: Final = 3


def ttft_quadratic_s(coefficients: Mapping[str, float], length: float) -> float:
    """``a + b*L + c*L**2`` seconds for a prompt of ``length`` tokens (form ``ttft-quadratic-v1``;
    the one place its formula is written, for fits and for stored fit documents alike)."""
    return float(_quadratic(coefficients, float(length)))


def _quadratic(c: Mapping[str, float], x: Any) -> Any:
    """The form's formula on a float or on a numpy array of them (the one place it is written)."""
    return c["a"] + c["b"] * x + c["c"] * x * x


@dataclass(frozen=True, slots=True)
class PrefillFit:
    """A fitted ``ttft-quadratic-v1`` model (seconds, input tokens).

    ``coefficients`` is ``{"a", "b", "c"}`` in seconds, seconds/token and seconds/token**2.
    ``domain`` is ``{"min_len", "max_len", "lengths"}``: the measured input lengths.
    ``residuals`` hold one entry per length (``x = (length,)``, observed median, prediction).
    ``worst_point`` is the ``x`` of the worst residual.
    """

    form: ClassVar[str] = PREFILL_FORM

    coefficients: dict[str, float]
    domain: dict[str, Any]
    residuals: tuple[PointResidual, ...]
    mean_rel_error: float
    worst_rel_error: float
    worst_point: tuple[float, ...]

    def predict(self, length: float) -> float:
        """Predicted TTFT in seconds for an input of ``length`` tokens."""
        return ttft_quadratic_s(self.coefficients, length)

    def predict_many(self, lengths: ArrayLike) -> NDArray[np.float64]:
        """Predicted TTFTs in seconds, elementwise over ``lengths`` (any array shape)."""
        import numpy as np  # deferred: numpy loads with the first fit, not with the package

        x = np.asarray(lengths, dtype=np.float64)
        return np.asarray(_quadratic(self.coefficients, x), dtype=np.float64)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able dict (str, int, float, list, dict only); :meth:`from_dict` reads it."""
        return write_document(
            self,
            form=PREFILL_FORM,
            fit_version=FIT_VERSION,
            x_names=["length"],
            coefficients=PREFILL_COEFFICIENTS,
            domain={
                "min_len": self.domain["min_len"],
                "max_len": self.domain["max_len"],
                "lengths": list(self.domain["lengths"]),
            },
        )

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PrefillFit:
        """Read a document written by :meth:`to_dict`; a malformed one raises :class:`FitError`."""
        where = "prefill fit"
        coefficients = read_header(
            d,
            where,
            form=PREFILL_FORM,
            fit_version=FIT_VERSION,
            x_names=["length"],
            coefficients=PREFILL_COEFFICIENTS,
        )
        raw_domain = get_mapping(d, "domain", where)
        check_keys(raw_domain, f"{where}.domain", required=("min_len", "max_len", "lengths"))
        lengths = [
            get_int(v, f"{where}.domain.lengths[{i}]", minimum=1)
            for i, v in enumerate(get_list(raw_domain, "lengths", f"{where}.domain"))
        ]
        domain = _domain(lengths)
        for key in ("min_len", "max_len"):
            if raw_domain[key] != domain[key] or isinstance(raw_domain[key], bool):
                raise FitError(
                    f"{where}.domain.{key}: {raw_domain[key]!r} disagrees with lengths {lengths}"
                )
        if lengths != domain["lengths"]:
            raise FitError(f"{where}.domain.lengths: expected distinct ascending, got {lengths}")
        residuals = read_residuals(d, where, arity=1)
        if [r.x[0] for r in residuals] != lengths:
            raise FitError(f"{where}.residuals: points disagree with domain.lengths {lengths}")
        mean, worst, worst_point = check_summary(d, where, residuals)
        fit = cls(
            coefficients=coefficients,
            domain=domain,
            residuals=residuals,
            mean_rel_error=mean,
            worst_rel_error=worst,
            worst_point=worst_point,
        )
        check_predictions(residuals, lambda x: fit.predict(x[0]), where)
        return fit


def _domain(lengths: Sequence[int]) -> dict[str, Any]:
    ordered = sorted(set(lengths))
    if len(ordered) < _MIN_LENGTHS:
        raise FitError(f"prefill fit: expected at least {_MIN_LENGTHS} lengths, got {ordered}")
    return {"min_len": ordered[0], "max_len": ordered[-1], "lengths": ordered}


def median_by_length(raw: Mapping[int, Sequence[float]]) -> dict[int, float]:
    """Median TTFT (seconds) of each length's raw timings, keyed by length in ascending order.

    Every timing must be finite and positive and every length needs at least one timing;
    otherwise :class:`InsufficientDataError` names the length and value.
    """
    import numpy as np  # deferred: numpy loads with the first fit, not with the package

    out: dict[int, float] = {}
    for length in sorted(raw):
        key = positive_int(length, "prefill length")
        values = raw[length]
        if len(values) == 0:
            raise InsufficientDataError(f"prefill length {key} has no timings")
        times = positive_times(values, f"ttft_s at length {key}")
        out[key] = float(np.median(times))
    return out


def fit_prefill(lengths: Sequence[int], ttft_s: Sequence[float]) -> PrefillFit:
    """Fit ``ttft-quadratic-v1`` to per-length medians (one TTFT in seconds per distinct length).

    Least squares on relative error (weights 1/y) with a, b, c >= 0, solved by NNLS on a
    column-scaled design matrix (deterministic). Needs at least three distinct lengths; each
    length must appear once (use :func:`median_by_length` on raw repeats) and each TTFT must be
    finite and positive, otherwise :class:`InsufficientDataError` names the value.
    """
    if len(lengths) != len(ttft_s):
        raise InsufficientDataError(
            f"got {len(lengths)} lengths but {len(ttft_s)} TTFT values; they must pair up"
        )
    checked = [positive_int(v, f"prefill length[{i}]") for i, v in enumerate(lengths)]
    seen: set[int] = set()
    for length in checked:
        if length in seen:
            raise InsufficientDataError(
                f"prefill length {length} appears more than once; fit per-length medians "
                "(see median_by_length)"
            )
        seen.add(length)
    if len(checked) < _MIN_LENGTHS:
        raise InsufficientDataError(
            f"a prefill fit needs at least {_MIN_LENGTHS} distinct lengths, got {len(checked)}"
            f" ({sorted(checked)})"
        )
    times = [
        positive_time(v, f"ttft_s at length {n}") for n, v in zip(checked, ttft_s, strict=True)
    ]
    order = sorted(range(len(checked)), key=checked.__getitem__)
    import numpy as np  # deferred: numpy loads with the first fit, not with the package

    x = np.array([checked[i] for i in order], dtype=np.float64)
    y = np.array([times[i] for i in order], dtype=np.float64)
    design = np.column_stack([np.ones_like(x), x, x * x])
    points = [(checked[i],) for i in order]
    coefficients, residuals = solve_relative(design, y, PREFILL_COEFFICIENTS, points)
    mean, worst, worst_point = summarize(residuals)
    return PrefillFit(
        coefficients=coefficients,
        domain=_domain(checked),
        residuals=residuals,
        mean_rel_error=mean,
        worst_rel_error=worst,
        worst_point=worst_point,
    )
