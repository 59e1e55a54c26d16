"""The mixing form ``mixing-share-step-v1``: how much of a prefill's time lands on running decodes.

While an engine prefills a prompt of ``L`` tokens, the streams it is decoding lose

``loss_s(L) = share·(b·L + c·L²) + step_s·chunks(L)``

where ``b·L + c·L²`` is the prefill fit's on-device time of the prompt (``ttft-quadratic-v1``
without its intercept) and ``chunks(L) = ⌈L / max_num_batched_tokens⌉`` the steps it spans
(1 with chunked prefill off). A scheduler that puts the prefill chunk and the decode tokens in one
step (vLLM's chunked prefill) has ``share ≈ 1`` and ``step_s ≈ 0``; one whose prefill steps and
decode steps take turns pays a whole step's fixed cost per chunk (``step_s ≈ d0``); one that runs
prefills beside its decodes has ``share < 1``.

The loss is measured by :func:`~narwhal_fit.mixing_loss` (in ``_mixing_loss``) on the token times
of streams into which prefills were injected (a mixing point, ``narwhal-profile --mixing``) and
fitted by :func:`fit_mixing`.
A measured loss may be zero or negative (noise on an engine that barely slows down, or a host
that slowed the streams' quiet stretches more than the prefills did), so the fit weights each point
by ``1 / max(loss_s, floor)`` instead of ``1 / loss_s``, and the residuals' relative errors divide
by the same. The floor is a tenth of the largest loss the points measured
(:data:`MIXING_RELATIVE_FLOOR`), never below :data:`MIXING_FLOOR_S`: a point near or below zero
then weighs about as much as the smallest real loss, not a thousand times the largest (with the
floor at 1 ms alone, one point at -9 ms pulled a fit on vLLM to share 0, step 0, 302 % mean
error). Documents of ``fit_version`` 1 were fitted with the 1 ms floor alone and read as written.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Final

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
from narwhal_fit._inputs import finite_time, positive_int
from narwhal_fit._residuals import (
    PointResidual,
    check_predictions,
    check_summary,
    read_residuals,
    solve_relative,
    summarize,
)

__all__ = [
    "MIXING_COEFFICIENTS",
    "MIXING_FLOOR_S",
    "MIXING_FORM",
    "MIXING_RELATIVE_FLOOR",
    "MIXING_WEIGHTS",
    "MixingFit",
    "MixingPoint",
    "fit_mixing",
    "mixing_floor_s",
    "mixing_loss_s",
    "prefill_chunks",
    "prefill_work_s",
]

MIXING_FORM: Final = "mixing-share-step-v1"
"""Form name of the mixing fit: ``loss_s = share·work_s + step_s·chunks``, coefficients >= 0."""

MIXING_COEFFICIENTS: Final = ("share", "step_s")
"""Its coefficients: share (of the prefill's on-device time, no unit) and step_s (s per chunk)."""

MIXING_FLOOR_S: Final = 1e-3
"""The smallest floor (seconds) a point is weighted by, whatever the points measured."""

MIXING_RELATIVE_FLOOR: Final = 0.1
"""The floor as a share of the largest loss the points measured: a loss below it (noise around
zero, or below zero) counts as this much, so it neither divides by zero nor outweighs the rest."""

MIXING_WEIGHTS: Final = "1/max(y,0.1*max(y),0.001)"
"""Weighting a mixing fit document records: each residual divided by ``max(observed, floor)``
with the floor of :func:`mixing_floor_s` over the document's observed losses."""

FIT_VERSION: Final = 2
_FIRST_WEIGHTS: Final = "1/max(y,0.001)"
"""What ``fit_version`` 1 recorded: the floor was :data:`MIXING_FLOOR_S` alone."""
_X_NAMES: Final = ["chunks", "work_s"]


def mixing_floor_s(losses: Sequence[float]) -> float:
    """The floor (s) points with these measured losses are weighted by: a tenth of the largest,
    at least :data:`MIXING_FLOOR_S`."""
    return max(MIXING_FLOOR_S, MIXING_RELATIVE_FLOOR * max(losses, default=0.0))


def _stored_floor(d: Mapping[str, Any]) -> float:
    """The floor a version-2 document's residuals were weighted by (its finite observed losses;
    a malformed residual is named by :func:`read_residuals` afterwards)."""
    raw = d.get("residuals")
    observed = (
        [r.get("observed") for r in raw if isinstance(r, Mapping)] if isinstance(raw, list) else []
    )
    return mixing_floor_s(
        [
            float(o)
            for o in observed
            if isinstance(o, int | float) and not isinstance(o, bool) and math.isfinite(o)
        ]
    )


def prefill_chunks(length: int, budget: int | None) -> int:
    """Steps a prompt of ``length`` tokens spans under a per-step budget (None: one step)."""
    if budget is None:
        return 1
    return max(1, math.ceil(length / budget))


def prefill_work_s(prefill_coefficients: Mapping[str, float], length: float) -> float:
    """The on-device time (s) of a prompt of ``length`` tokens by a ``ttft-quadratic-v1`` fit's
    coefficients: ``b·L + c·L²`` (its TTFT without the intercept ``a``)."""
    c = prefill_coefficients
    x = float(length)
    return c["b"] * x + c["c"] * x * x


def mixing_loss_s(coefficients: Mapping[str, float], work_s: float, chunks: int) -> float:
    """Decode time lost to one prefill of on-device time ``work_s`` spanning ``chunks`` steps."""
    return coefficients["share"] * work_s + coefficients["step_s"] * chunks


@dataclass(frozen=True, slots=True)
class MixingPoint:
    """One mixing point: a prefill of on-device time ``work_s`` (s) spanning ``chunks`` steps cost
    the running decode streams ``loss_s`` seconds each (may be <= 0: noise).

    ``prefill_len`` and ``input_len`` (optional) are the prefill's and the streams' prompt
    lengths; when every point gives one, the fit's domain lists the distinct values.
    """

    work_s: float
    chunks: int
    loss_s: float
    prefill_len: int | None = None
    input_len: int | None = None


@dataclass(frozen=True, slots=True)
class MixingFit:
    """A fitted ``mixing-share-step-v1`` model.

    ``coefficients`` is ``{"share", "step_s"}`` (no unit, seconds per chunk). ``domain`` is
    ``{"chunks": [...], "work_s_min", "work_s_max"}`` plus ``"prefill_lens"`` and ``"input_lens"``
    when the points carried them. ``residuals`` hold one entry per point with
    ``x = (chunks, work_s)``; their ``rel_error`` divides by ``max(observed, floor)`` with the
    floor of :func:`mixing_floor_s` over the observed losses (:data:`MIXING_FLOOR_S` alone for a
    document of ``fit_version`` 1, which :meth:`from_dict` reads as written; :meth:`to_dict`
    writes version 2).
    """

    form: ClassVar[str] = MIXING_FORM

    coefficients: dict[str, float]
    domain: dict[str, Any]
    residuals: tuple[PointResidual, ...]
    mean_rel_error: float
    worst_rel_error: float
    worst_point: tuple[float, ...]

    def predict(self, work_s: float, chunks: int) -> float:
        """Predicted decode time lost (s) to one prefill of ``work_s`` spanning ``chunks``."""
        return mixing_loss_s(self.coefficients, work_s, chunks)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able dict (str, int, float, list, dict only); :meth:`from_dict` reads it."""
        domain: dict[str, Any] = {
            "chunks": list(self.domain["chunks"]),
            "work_s_min": self.domain["work_s_min"],
            "work_s_max": self.domain["work_s_max"],
        }
        for key in _OPTIONAL_LENS:
            if key in self.domain:
                domain[key] = list(self.domain[key])
        return write_document(
            self,
            form=MIXING_FORM,
            fit_version=FIT_VERSION,
            x_names=_X_NAMES,
            coefficients=MIXING_COEFFICIENTS,
            domain=domain,
            weights=MIXING_WEIGHTS,
        )

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> MixingFit:
        """Read a document written by :meth:`to_dict`; a malformed one raises :class:`FitError`."""
        where = "mixing fit"
        first = isinstance(d, Mapping) and d.get("fit_version") == 1
        coefficients = read_header(
            d,
            where,
            form=MIXING_FORM,
            fit_version=1 if first else FIT_VERSION,
            x_names=_X_NAMES,
            coefficients=MIXING_COEFFICIENTS,
            weights=_FIRST_WEIGHTS if first else MIXING_WEIGHTS,
        )
        floor = MIXING_FLOOR_S if first else _stored_floor(d)
        residuals = read_residuals(d, where, arity=2, floor=floor)
        for i, r in enumerate(residuals):
            get_number(r.x[1], f"{where}.residuals[{i}].x[1]", minimum=0.0)
        raw_domain = get_mapping(d, "domain", where)
        check_keys(
            raw_domain,
            f"{where}.domain",
            required=("chunks", "work_s_min", "work_s_max"),
            optional=_OPTIONAL_LENS,
        )
        lens: dict[str, list[int]] = {}
        for key in _OPTIONAL_LENS:
            if key in raw_domain:
                values = get_list(raw_domain, key, f"{where}.domain")
                lens[key] = [
                    get_int(v, f"{where}.domain.{key}[{i}]", minimum=1)
                    for i, v in enumerate(values)
                ]
        domain = _domain([(int(r.x[0]), float(r.x[1])) for r in residuals], lens)
        chunks = [
            get_int(v, f"{where}.domain.chunks[{i}]", minimum=1)
            for i, v in enumerate(get_list(raw_domain, "chunks", f"{where}.domain"))
        ]
        if chunks != domain["chunks"]:
            raise FitError(
                f"{where}.domain.chunks: {chunks!r} disagrees with the residual points "
                f"({domain['chunks']!r})"
            )
        for key in ("work_s_min", "work_s_max"):
            stored = get_number(raw_domain[key], f"{where}.domain.{key}")
            if stored != domain[key]:
                raise FitError(
                    f"{where}.domain.{key}: {raw_domain[key]!r} disagrees with the residual points"
                    f" ({domain[key]!r})"
                )
        for key, values in lens.items():
            if values != domain[key]:
                raise FitError(f"{where}.domain.{key}: expected distinct ascending, got {values}")
        mean, worst, worst_point = check_summary(d, where, residuals)
        fit = cls(
            coefficients=coefficients,
            domain=domain,
            residuals=residuals,
            mean_rel_error=mean,
            worst_rel_error=worst,
            worst_point=worst_point,
        )
        check_predictions(residuals, lambda x: fit.predict(x[1], int(x[0])), where)
        return fit


_OPTIONAL_LENS: Final = ("prefill_lens", "input_lens")


def _domain(
    points: Sequence[tuple[int, float]], lens: Mapping[str, Sequence[int]]
) -> dict[str, Any]:
    if not points:
        raise FitError("mixing fit: no points")
    work = [w for _, w in points]
    domain: dict[str, Any] = {
        "chunks": sorted({c for c, _ in points}),
        "work_s_min": min(work),
        "work_s_max": max(work),
    }
    for key in _OPTIONAL_LENS:
        if key in lens:
            domain[key] = sorted(set(lens[key]))
    return domain


def fit_mixing(points: Sequence[MixingPoint]) -> MixingFit:
    """Fit ``mixing-share-step-v1`` to mixing points.

    Least squares on relative error with share, step_s >= 0 (NNLS, deterministic), each point
    weighted by ``1 / max(loss_s, floor)`` with the floor of :func:`mixing_floor_s` (a tenth of
    the largest loss, at least 1 ms): a loss below the floor (zero or negative: noise around an
    engine that barely slows down) counts as the floor, so it is kept but can neither divide by
    zero nor outweigh the points that measured a real loss. Points keep their given order in the
    residuals; repeats are allowed. Needs at least two points with distinct ``(work_s, chunks)``;
    every ``work_s`` must be finite and >= 0, every ``chunks`` an integer >= 1 and every
    ``loss_s`` finite, otherwise :class:`InsufficientDataError` names the value.
    """
    works: list[float] = []
    chunks: list[int] = []
    ys: list[float] = []
    lens: dict[str, list[int]] = {key: [] for key in _OPTIONAL_LENS}
    for i, p in enumerate(points):
        works.append(finite_time(p.work_s, f"mixing point[{i}].work_s", minimum=0.0))
        chunks.append(positive_int(p.chunks, f"mixing point[{i}].chunks"))
        ys.append(finite_time(p.loss_s, f"mixing point[{i}].loss_s"))
        if p.prefill_len is not None:
            lens["prefill_lens"].append(
                positive_int(p.prefill_len, f"mixing point[{i}].prefill_len")
            )
        if p.input_len is not None:
            lens["input_lens"].append(positive_int(p.input_len, f"mixing point[{i}].input_len"))
    distinct = sorted(set(zip(works, chunks, strict=True)))
    if len(distinct) < 2:
        shown = ", ".join(f"(work_s {w:.6g}, chunks {c})" for w, c in distinct) or "none"
        raise InsufficientDataError(
            "a mixing fit needs points at two or more distinct (work_s, chunks), i.e. two prefill "
            f"lengths, got {len(ys)} point(s) at {shown}"
        )
    import numpy as np  # deferred: numpy loads with the first fit, not with the package

    w = np.array(works, dtype=np.float64)
    c = np.array(chunks, dtype=np.float64)
    y = np.array(ys, dtype=np.float64)
    design = np.column_stack([w, c])
    xs = list(zip(chunks, works, strict=True))
    coefficients, residuals = solve_relative(
        design, y, MIXING_COEFFICIENTS, xs, floor=mixing_floor_s(ys)
    )
    mean, worst, worst_point = summarize(residuals)
    kept = {key: values for key, values in lens.items() if len(values) == len(ys)}
    return MixingFit(
        coefficients=coefficients,
        domain=_domain(xs, kept),
        residuals=residuals,
        mean_rel_error=mean,
        worst_rel_error=worst,
        worst_point=worst_point,
    )
