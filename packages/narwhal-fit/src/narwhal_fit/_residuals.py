"""Per-point residuals and the error summary every fit form reports."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

from narwhal_fit._document import check_keys, get_int, get_list, get_number
from narwhal_fit._errors import FitError
from narwhal_fit._weighted import nnls_relative

__all__ = [
    "PointResidual",
    "build_residuals",
    "check_predictions",
    "check_summary",
    "read_residuals",
    "relative_error",
    "solve_relative",
    "summarize",
]

_REL_TOLERANCE = 1e-9


@dataclass(frozen=True, slots=True)
class PointResidual:
    """One fitted point.

    ``x`` is the point's coordinates: ``(length,)`` for prefill, ``(concurrency, ctx)`` for decode,
    ``(chunks, work_s)`` for mixing. ``rel_error = |predicted - observed| / observed`` (never
    negative); a form whose observations may be zero or negative (mixing) divides by
    ``max(observed, floor)`` instead.
    """

    x: tuple[float, ...]
    observed: float
    predicted: float
    rel_error: float

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able dict: ``{"x": [...], "observed", "predicted", "rel_error"}``."""
        return {
            "x": list(self.x),
            "observed": self.observed,
            "predicted": self.predicted,
            "rel_error": self.rel_error,
        }

    @classmethod
    def from_dict(
        cls, d: Any, where: str, *, arity: int, floor: float | None = None
    ) -> PointResidual:
        """Read a residual written by :meth:`to_dict`; ``x`` must have ``arity`` numbers. With
        ``floor``, ``observed`` may be any finite number and ``rel_error`` divides by
        ``max(observed, floor)``; without it, ``observed`` must be positive."""
        if not isinstance(d, Mapping):
            raise FitError(f"{where}: expected an object, got {type(d).__name__}")
        check_keys(d, where, required=("x", "observed", "predicted", "rel_error"))
        raw_x = get_list(d, "x", where)
        if len(raw_x) != arity:
            raise FitError(f"{where}.x: expected {arity} coordinate(s), got {len(raw_x)}")
        x = tuple(_keep_int(v, f"{where}.x[{i}]") for i, v in enumerate(raw_x))
        observed = get_number(d["observed"], f"{where}.observed")
        if floor is None and observed <= 0.0:
            raise FitError(f"{where}.observed: expected a positive number, got {observed!r}")
        predicted = get_number(d["predicted"], f"{where}.predicted", minimum=0.0)
        rel_error = get_number(d["rel_error"], f"{where}.rel_error", minimum=0.0)
        expected = relative_error(observed, predicted, floor)
        if not math.isclose(rel_error, expected, rel_tol=_REL_TOLERANCE, abs_tol=1e-12):
            divisor = "observed" if floor is None else f"max(observed, {floor:g})"
            raise FitError(
                f"{where}.rel_error: {rel_error!r} disagrees with |predicted - observed| / "
                f"{divisor} = {expected!r}"
            )
        return cls(x=x, observed=observed, predicted=predicted, rel_error=rel_error)


def relative_error(observed: float, predicted: float, floor: float | None = None) -> float:
    """``|predicted - observed| / observed``; with a floor, divided by ``max(observed, floor)``."""
    divisor = observed if floor is None else max(observed, floor)
    return abs(predicted - observed) / divisor


def _keep_int(value: Any, where: str) -> float:
    """Return a coordinate, keeping ints as ints so lengths and concurrencies stay integral."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return get_number(value, where)


def read_residuals(
    d: Mapping[str, Any], where: str, *, arity: int, floor: float | None = None
) -> tuple[PointResidual, ...]:
    """Read ``d["residuals"]`` (each as :meth:`PointResidual.from_dict` with ``arity``
    coordinates and ``floor``) and require every first coordinate (a length, a concurrency or a
    chunk count) to be an integer >= 1."""
    residuals = tuple(
        PointResidual.from_dict(r, f"{where}.residuals[{i}]", arity=arity, floor=floor)
        for i, r in enumerate(get_list(d, "residuals", where))
    )
    for i, r in enumerate(residuals):
        get_int(r.x[0], f"{where}.residuals[{i}].x[0]", minimum=1)
    return residuals


def build_residuals(
    xs: Sequence[tuple[float, ...]],
    observed: NDArray[np.float64],
    predicted: NDArray[np.float64],
    floor: float | None = None,
) -> tuple[PointResidual, ...]:
    """Pair each point's coordinates with observed and predicted values (plain Python floats);
    ``floor`` as in :func:`relative_error`."""
    out = []
    for x, obs, pred in zip(xs, observed.tolist(), predicted.tolist(), strict=True):
        o, p = float(obs), float(pred)
        out.append(
            PointResidual(x=x, observed=o, predicted=p, rel_error=relative_error(o, p, floor))
        )
    return tuple(out)


def solve_relative(
    design: NDArray[np.float64],
    y: NDArray[np.float64],
    names: Sequence[str],
    points: Sequence[tuple[float, ...]],
    floor: float | None = None,
) -> tuple[dict[str, float], tuple[PointResidual, ...]]:
    """Fit ``design`` to ``y`` with :func:`nnls_relative`; return the coefficients keyed by
    ``names`` (one per design column) and one residual per row at the coordinates ``points``.
    With ``floor``, each row is weighted by ``1 / max(y, floor)`` instead of ``1 / y``."""
    import numpy as np  # deferred: numpy loads with the first fit, not with the package

    scale = None if floor is None else np.maximum(y, floor)
    beta = nnls_relative(design, y, scale)
    coefficients = {k: float(v) for k, v in zip(names, beta.tolist(), strict=True)}
    return coefficients, build_residuals(points, y, design @ beta, floor)


def summarize(residuals: Sequence[PointResidual]) -> tuple[float, float, tuple[float, ...]]:
    """Return (mean relative error, worst relative error, worst point); ties: first point wins."""
    if not residuals:
        raise FitError("a fit needs at least one residual")
    errors = [r.rel_error for r in residuals]
    worst_index = max(range(len(errors)), key=errors.__getitem__)
    return math.fsum(errors) / len(errors), errors[worst_index], residuals[worst_index].x


def check_summary(
    d: Mapping[str, Any], where: str, residuals: Sequence[PointResidual]
) -> tuple[float, float, tuple[float, ...]]:
    """Recompute the summary from ``residuals`` and require the document to agree with it."""
    mean, worst, worst_point = summarize(residuals)
    for key, value in (("mean_rel_error", mean), ("worst_rel_error", worst)):
        stored = get_number(d[key], f"{where}.{key}", minimum=0.0)
        if not math.isclose(stored, value, rel_tol=_REL_TOLERANCE, abs_tol=1e-12):
            raise FitError(f"{where}.{key}: {stored!r} disagrees with the residuals ({value!r})")
    raw_point = get_list(d, "worst_point", where)
    stored_point = [get_number(v, f"{where}.worst_point[{i}]") for i, v in enumerate(raw_point)]
    if stored_point != [float(v) for v in worst_point]:
        raise FitError(
            f"{where}.worst_point: {raw_point!r} disagrees with the residuals "
            f"({list(worst_point)!r})"
        )
    return mean, worst, worst_point


def check_predictions(
    residuals: Sequence[PointResidual], predict: Callable[[tuple[float, ...]], float], where: str
) -> None:
    """Require every residual's ``predicted`` to be what the coefficients give at its ``x``."""
    for i, r in enumerate(residuals):
        expected = predict(r.x)
        if not math.isclose(r.predicted, expected, rel_tol=_REL_TOLERANCE, abs_tol=1e-15):
            raise FitError(
                f"{where}.residuals[{i}].predicted: {r.predicted!r} disagrees with the "
                f"coefficients ({expected!r} at x={list(r.x)})"
            )
