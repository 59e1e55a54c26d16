"""The mixing form ``mixing-share-step-v1``: how much of a prefill's time lands on running decodes.

While an engine prefills a prompt of ``L`` tokens, the streams it is decoding lose

``loss_s(L) = share·(b·L + c·L²) + step_s·chunks(L)``

where ``b·L + c·L²`` is the prefill fit's on-device time of the prompt (``ttft-quadratic-v1``
without its intercept) and ``chunks(L) = ⌈L / max_num_batched_tokens⌉`` the steps it spans
(1 with chunked prefill off). A scheduler that puts the prefill chunk and the decode tokens in one
step (vLLM's chunked prefill) has ``share ≈ 1`` and ``step_s ≈ 0``; one whose prefill steps and
decode steps take turns pays a whole step's fixed cost per chunk (``step_s ≈ d0``); one that runs
prefills beside its decodes has ``share < 1``.

The loss is measured by :func:`mixing_loss` on the token times of streams into which prefills
were injected (a mixing point, ``narwhal-profile --mixing``) and fitted by :func:`fit_mixing`.
A measured loss may be zero or slightly negative (noise on an engine that barely slows down), so
the fit weights each point by ``1 / max(loss_s, MIXING_FLOOR_S)`` instead of ``1 / loss_s``, and
the residuals' relative errors divide by the same.
"""

from __future__ import annotations

import bisect
import math
import numbers
import statistics
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
from narwhal_fit._inputs import positive_int
from narwhal_fit._residuals import (
    PointResidual,
    check_predictions,
    check_summary,
    read_residuals,
    solve_relative,
    summarize,
)
from narwhal_fit._window import StreamTimes

__all__ = [
    "MIXING_COEFFICIENTS",
    "MIXING_FLOOR_S",
    "MIXING_FORM",
    "MIXING_WEIGHTS",
    "MixingFit",
    "MixingLoss",
    "MixingPoint",
    "fit_mixing",
    "mixing_loss",
    "mixing_loss_s",
    "prefill_chunks",
    "prefill_work_s",
]

MIXING_FORM: Final = "mixing-share-step-v1"
"""Form name of the mixing fit: ``loss_s = share·work_s + step_s·chunks``, coefficients >= 0."""

MIXING_COEFFICIENTS: Final = ("share", "step_s")
"""Its coefficients: share (of the prefill's on-device time, no unit) and step_s (s per chunk)."""

MIXING_FLOOR_S: Final = 1e-3
"""The smallest loss (seconds) a point is weighted by: a loss at or below it (noise around zero)
counts as this much, so it neither divides by zero nor outweighs every other point."""

MIXING_WEIGHTS: Final = "1/max(y,0.001)"
"""Weighting a mixing fit document records: each residual divided by ``max(observed, floor)``."""

FIT_VERSION: Final = 1
_X_NAMES: Final = ["chunks", "work_s"]


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
    ``x = (chunks, work_s)``; their ``rel_error`` divides by ``max(observed, MIXING_FLOOR_S)``.
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
        coefficients = read_header(
            d,
            where,
            form=MIXING_FORM,
            fit_version=FIT_VERSION,
            x_names=_X_NAMES,
            coefficients=MIXING_COEFFICIENTS,
            weights=MIXING_WEIGHTS,
        )
        residuals = read_residuals(d, where, arity=2, floor=MIXING_FLOOR_S)
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


def _finite(value: object, what: str, *, minimum: float | None = None) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InsufficientDataError(f"{what} must be a number of seconds, got {value!r}")
    number = float(value)
    if not math.isfinite(number) or (minimum is not None and number < minimum):
        bound = "finite" if minimum is None else f"finite and >= {minimum:g}"
        raise InsufficientDataError(f"{what} must be {bound}, got {value!r}")
    return number


def fit_mixing(points: Sequence[MixingPoint]) -> MixingFit:
    """Fit ``mixing-share-step-v1`` to mixing points.

    Least squares on relative error with share, step_s >= 0 (NNLS, deterministic), each point
    weighted by ``1 / max(loss_s, MIXING_FLOOR_S)``: a loss at or below the floor (zero or
    negative: noise around an engine that barely slows down) counts as the floor, so it is kept
    but cannot divide by zero. Points keep their given order in the residuals; repeats are
    allowed. Needs at least two points with distinct ``(work_s, chunks)``; every ``work_s`` must
    be finite and >= 0, every ``chunks`` an integer >= 1 and every ``loss_s`` finite, otherwise
    :class:`InsufficientDataError` names the value.
    """
    works: list[float] = []
    chunks: list[int] = []
    ys: list[float] = []
    lens: dict[str, list[int]] = {key: [] for key in _OPTIONAL_LENS}
    for i, p in enumerate(points):
        works.append(_finite(p.work_s, f"mixing point[{i}].work_s", minimum=0.0))
        chunks.append(positive_int(p.chunks, f"mixing point[{i}].chunks"))
        ys.append(_finite(p.loss_s, f"mixing point[{i}].loss_s"))
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
        design, y, MIXING_COEFFICIENTS, xs, floor=MIXING_FLOOR_S
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


@dataclass(frozen=True, slots=True)
class MixingLoss:
    """What injected prefills cost the decode streams they ran beside.

    ``loss_s`` is the point's loss per prefill: the mean over streams of ``stream_loss_s`` divided
    by the number of prefills. Per stream: ``stream_loss_s`` the time its stretch took beyond its
    intervals at ``quiet_s``, ``quiet_s`` its quiet per-token interval (the mean pace just before
    and just after the stretch, inside the window where every stream decodes) and ``intervals``
    the tokens its stretch delivered.
    """

    loss_s: float
    stream_loss_s: tuple[float, ...]
    quiet_s: tuple[float, ...]
    intervals: tuple[int, ...]
    prefills: int


def _pace(times: Sequence[int], lo: int, hi: int) -> float | None:
    """Mean per-token interval (ns) of the stream inside ``[lo, hi]``: from its first arrival in
    there to its last, over the tokens stamped after the first (as :func:`cohort_tpot` counts);
    None when fewer than one interval falls inside."""
    first = bisect.bisect_left(times, lo)
    last = bisect.bisect_right(times, hi) - 1
    if last < first or times[last] == times[first]:
        return None
    tokens = bisect.bisect_right(times, times[last]) - bisect.bisect_right(times, times[first])
    return (times[last] - times[first]) / tokens


def _quiet_pace(
    times: Sequence[int], window_start: int, window_end: int, start: int, end: int
) -> float | None:
    """The stream's quiet per-token interval (ns) around its stretch ``[start, end]``.

    The mean pace over equally long spans just before and just after the stretch, inside the
    window where every stream decodes (each as long as the shorter of the two quiet sides), then
    the mean of the two: their midpoint is the stretch's, so a pace that drifts as the context
    grows averages out. A mean, not a median: the stretch's time is a sum of intervals, and
    intervals read by a client are skewed (a median read 1.20 ms where the mean was 1.38 ms).
    One side alone when the other holds no interval; None when neither does.
    """
    before = max(0, start - window_start)
    after = max(0, window_end - end)
    span = min(before, after) if before and after else max(before, after)
    paces = [
        pace
        for lo, hi in ((start - span, start), (end, end + span))
        if (pace := _pace(times, max(lo, window_start), min(hi, window_end))) is not None
    ]
    return statistics.fmean(paces) if paces else None


def mixing_loss(
    streams: Sequence[StreamTimes], first_send_ns: int, last_first_ns: int, prefills: int
) -> MixingLoss:
    """The decode time ``prefills`` injected prefills cost ``streams`` (token times in ns, one
    clock for streams and prefills), per prefill.

    For each stream: the stretch runs from its last token stamped before ``first_send_ns`` (the
    first prefill's send) to its first token stamped after ``last_first_ns`` (the last prefill's
    first token), so it holds every prefill. The stretch delivered ``k`` tokens (those stamped
    after its start, up to and including its end's arrival, as :func:`cohort_tpot` counts them);
    at the stream's quiet interval ``q`` (its mean per-token pace over equally long spans just
    before and just after the stretch, inside the window where every stream decodes) they take
    ``k·q``, and the rest of the stretch's time is the stream's loss. The point's loss is the mean
    over streams divided by ``prefills``; it may come out slightly negative (noise) for an engine
    that barely slows down.

    :class:`InsufficientDataError` names what is missing: no streams, ``prefills < 1``, the last
    first token before the first send, a stream without a token before the first send or after
    the last prefill's first token (it ended first), or one without a quiet interval.
    """
    if not streams:
        raise InsufficientDataError("a mixing loss needs at least one decode stream")
    count = positive_int(prefills, "prefills")
    if last_first_ns < first_send_ns:
        raise InsufficientDataError(
            f"the last prefill's first token ({last_first_ns} ns) comes before the first "
            f"prefill's send ({first_send_ns} ns)"
        )
    for i, s in enumerate(streams):
        if not s.token_ns:
            raise InsufficientDataError(f"stream {i} has no output tokens")
    window_start = max(s.token_ns[0] for s in streams)
    window_end = min(s.token_ns[-1] for s in streams)
    losses: list[float] = []
    quiet: list[float] = []
    intervals: list[int] = []
    for i, s in enumerate(streams):
        times = s.token_ns
        before = bisect.bisect_left(times, first_send_ns) - 1
        if before < 0:
            raise InsufficientDataError(
                f"stream {i} has no token before the first prefill was sent (its first token "
                f"came {(times[0] - first_send_ns) / 1e6:.1f} ms after it)"
            )
        after = bisect.bisect_right(times, last_first_ns)
        if after >= len(times):
            raise InsufficientDataError(
                f"stream {i} ended before the last prefill's first token (its last token came "
                f"{(last_first_ns - times[-1]) / 1e6:.1f} ms before it)"
            )
        start, end = times[before], times[after]
        k = bisect.bisect_right(times, end) - bisect.bisect_right(times, start)
        q = _quiet_pace(times, window_start, window_end, start, end)
        if q is None:
            raise InsufficientDataError(
                f"stream {i} has no token interval outside the prefills' stretch while every "
                "stream decodes, so its quiet pace is unknown"
            )
        losses.append((end - start - k * q) / 1e9)
        quiet.append(q / 1e9)
        intervals.append(k)
    return MixingLoss(
        loss_s=statistics.fmean(losses) / count,
        stream_loss_s=tuple(losses),
        quiet_s=tuple(quiet),
        intervals=tuple(intervals),
        prefills=count,
    )
