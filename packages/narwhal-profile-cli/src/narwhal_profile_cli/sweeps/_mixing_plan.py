"""How the mixing points (``--mixing``; docs/design.md §13 "Mixing points") are planned, and
what they record.

Per decode input length, mixing prefill length and repeat, one point (:func:`plan_points`):
``concurrency`` decode streams (:func:`mixing_concurrency`) and ``prefills`` one-token prompts of
the mixing length (:func:`mixing_lens`). :func:`plan_point` sizes it from the engine's fits: the
streams' ramp (the prefill fit's estimate, with :data:`RAMP_MARGIN`), a quiet stretch of
:data:`QUIET_INTERVALS` of their intervals by the decode fit (at least :data:`MIN_QUIET_S`),
prefills :data:`INTERVAL_TTFTS` TTFTs apart and the output tokens all that takes, or why the point
cannot run; its prefill work is ``b·L + c·L²`` by the prefill fit and its chunks
``⌈L / max_num_batched_tokens⌉`` (the engine's, as its scheduler settings give it). A point as
measured is a :class:`MixingRun`, an engine's points and the fit of the valid ones
(:func:`fit_runs`) a :class:`MixingResult`. Running the points against the engine is
``_mixing``'s.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from narwhal_fit import (
    DecodeFit,
    FitError,
    MixingFit,
    MixingPoint,
    PrefillFit,
    fit_mixing,
    prefill_chunks,
    prefill_work_s,
)
from narwhal_profile_cli._options import MixingOptions
from narwhal_profile_cli._progress import mixing_weight
from narwhal_profile_cli.sweeps._decode import StreamTrace
from narwhal_profile_cli.sweeps._prefill import PrefillTimings
from narwhal_profile_cli.sweeps._preflight import EngineProbe, SweepPoints
from narwhal_store import InjectedPrefill, MixingSample

__all__ = [
    "DEFAULT_BATCHED_TOKENS",
    "INTERVAL_TTFTS",
    "MIN_QUIET_S",
    "QUIET_INTERVALS",
    "RAMP_MARGIN",
    "TOKEN_MARGIN",
    "MixingContext",
    "MixingResult",
    "MixingRun",
    "PointPlan",
    "fit_runs",
    "mixing_concurrency",
    "mixing_lens",
    "mixing_work",
    "plan_point",
    "plan_points",
]

DEFAULT_BATCHED_TOKENS: Final = 8192
"""The per-step token budget chunks are counted with when the engine's ``max_num_batched_tokens``
is unknown (neither the engine nor the limits file gives it; ``EnginePlan.scheduler``): the
predictor's default."""

QUIET_INTERVALS: Final = 20
"""A quiet stretch lasts this many of the streams' intervals (by the decode fit) ..."""
MIN_QUIET_S: Final = 0.1
"""... and at least this long (seconds)."""
INTERVAL_TTFTS: Final = 3.0
"""Prefills are injected this many times their length's median TTFT apart, so each is done (and
the streams back at their quiet pace) before the next arrives."""
RAMP_MARGIN: Final = 1.5
"""The streams' ramp (each prompt's TTFT by the prefill fit, one after another) is waited out with
this margin before the first quiet stretch starts."""
TOKEN_MARGIN: Final = 1.1
"""The streams ask for this many times the tokens their span needs at the decode fit's TPOT (the
time the prefills cost them comes on top, free) ..."""
EXTRA_TOKENS: Final = 16
"""... plus this many."""
_MIN_TPOT_S: Final = 1e-4


def mixing_concurrency(requested: int, limit: int | None) -> int:
    """The streams of a mixing point: ``requested``, under a ``max_num_seqs`` limit at most
    ``limit - 1`` (the injected prefill needs a running slot of its own), and at least 1."""
    if limit is None:
        return requested
    return max(1, min(requested, limit - 1))


def mixing_lens(options: MixingOptions, prefill_lens: Sequence[int]) -> tuple[int, ...]:
    """The prefill lengths injected: ``--mixing-lens``, else the smallest and largest of the
    engine's kept prefill lengths."""
    if options.lens is not None:
        return options.lens
    return tuple(sorted({min(prefill_lens), max(prefill_lens)}))


def plan_points(points: SweepPoints, options: MixingOptions) -> list[tuple[int, int, int]]:
    """Every point in order: (decode input length, prefill length, repeat)."""
    return [
        (input_len, length, repeat)
        for input_len in points.decode_input_lens
        for length in mixing_lens(options, points.prefill_lens)
        for repeat in range(options.repeats)
    ]


def mixing_work(points: SweepPoints, options: MixingOptions) -> float:
    """Progress work units of one engine's mixing points."""
    n = mixing_concurrency(options.concurrency, points.limit)
    return sum(
        mixing_weight(input_len, n, length, options.prefills)
        for input_len, length, _ in plan_points(points, options)
    )


@dataclass(frozen=True, slots=True)
class MixingRun:
    """One mixing point as measured (or refused before sending: no streams, no prefills).

    ``loss_s`` is the loss per prefill when it could be computed (also on an invalid point, as a
    diagnostic); the point enters the fit only when ``reason`` is None.
    """

    input_len: int
    concurrency: int
    prefill_len: int
    interval_s: float
    repeat: int
    streams: list[StreamTrace]
    prefills: list[InjectedPrefill]
    work_s: float
    chunks: int
    loss_s: float | None
    reason: str | None

    @property
    def valid(self) -> bool:
        """Measured, with a loss, and nothing invalidated it."""
        return self.reason is None and self.loss_s is not None

    def label(self) -> str:
        """``input 512 x 4 + prefill 2048, repeat 1``."""
        return (
            f"input {self.input_len} x {self.concurrency} + prefill {self.prefill_len}, "
            f"repeat {self.repeat + 1}"
        )

    def point(self) -> MixingPoint | None:
        """The fit point, or None when the run is not valid."""
        if not self.valid or self.loss_s is None:
            return None
        return MixingPoint(
            work_s=self.work_s,
            chunks=self.chunks,
            loss_s=self.loss_s,
            prefill_len=self.prefill_len,
            input_len=self.input_len,
        )

    def sample(self) -> MixingSample:
        """The sidecar's record of the point."""
        return MixingSample(
            input_len=self.input_len,
            concurrency=self.concurrency,
            prefill_len=self.prefill_len,
            interval_s=self.interval_s,
            repeat=self.repeat,
            valid=self.valid,
            reason=self.reason,
            streams=[s.record() for s in self.streams],
            prefills=list(self.prefills),
            loss_s=self.loss_s,
            work_s=self.work_s,
            chunks=self.chunks,
        )


@dataclass(frozen=True, slots=True)
class MixingResult:
    """An engine's mixing points, their fit, and why there is none (``fit`` None)."""

    runs: list[MixingRun]
    fit: MixingFit | None
    why: str | None

    def samples(self) -> list[MixingSample]:
        """The sidecar's records, in measured order."""
        return [run.sample() for run in self.runs]

    def warnings(self, iid: str) -> list[str]:
        """Lines naming the points left out of the fit, and the missing fit."""
        lines = []
        left_out = [run for run in self.runs if not run.valid]
        if left_out:
            lines.append(
                f"{iid}: {len(left_out)} mixing point(s) left out of the fit: "
                + "; ".join(f"{run.label()}: {run.reason}" for run in left_out)
            )
        if self.fit is None:
            lines.append(f"{iid}: no mixing fit: {self.why}; the profile was written without one")
        return lines


def fit_runs(runs: Sequence[MixingRun]) -> tuple[MixingFit | None, str | None]:
    """The fit of the valid runs, or None and why it cannot be made."""
    points = [p for run in runs if (p := run.point()) is not None]
    try:
        return fit_mixing(points), None
    except FitError as exc:
        return None, f"{len(points)} valid mixing point(s) of {len(runs)}: {exc}"


@dataclass(frozen=True, slots=True)
class PointPlan:
    """How one point is run: the streams' tokens and timing, the prefills' spacing and work."""

    input_len: int
    concurrency: int
    prefill_len: int
    prefills: int
    interval_s: float
    quiet_s: float
    wait_s: float
    tokens: int
    work_s: float
    chunks: int
    problem: str | None


@dataclass(frozen=True, slots=True)
class MixingContext:
    """What every point of one engine shares."""

    probe: EngineProbe
    prefill: list[PrefillTimings]
    prefill_fit: PrefillFit
    decode_fit: DecodeFit
    budget: int | None


def _ttft_s(ctx: MixingContext, length: int) -> float:
    """The median TTFT measured at ``length`` in the prefill sweep, else the prefill fit's."""
    for sample in ctx.prefill:
        if sample.length == length and sample.ttft_s:
            return float(statistics.median(sample.ttft_s))
    return ctx.prefill_fit.predict(length)


def plan_point(ctx: MixingContext, input_len: int, n: int, length: int, prefills: int) -> PointPlan:
    """The point's timing and token counts from the fits, and why it cannot run, if so."""
    max_model_len = ctx.probe.max_model_len
    tpot = max(ctx.decode_fit.predict(n, input_len), _MIN_TPOT_S)
    quiet = max(QUIET_INTERVALS * tpot, MIN_QUIET_S)
    interval = INTERVAL_TTFTS * _ttft_s(ctx, length)
    wait = RAMP_MARGIN * n * max(ctx.prefill_fit.predict(input_len), 0.0) + quiet
    span = wait + prefills * interval + quiet
    tokens = math.ceil(TOKEN_MARGIN * span / tpot) + EXTRA_TOKENS
    room = max_model_len - input_len
    problem = None
    if length + 1 > max_model_len:
        problem = f"a prefill of {length} tokens does not fit max_model_len {max_model_len}"
    elif tokens > room:
        problem = (
            f"the streams need {tokens} output tokens to decode through {prefills} prefills "
            f"{interval * 1e3:.0f} ms apart and two quiet stretches ({span:.2f} s at "
            f"{tpot * 1e3:.2f} ms per token), but max_model_len {max_model_len} leaves {room} "
            f"after {input_len} input tokens"
        )
    budget = ctx.budget if ctx.budget is not None else DEFAULT_BATCHED_TOKENS
    return PointPlan(
        input_len=input_len,
        concurrency=n,
        prefill_len=length,
        prefills=prefills,
        interval_s=interval,
        quiet_s=quiet,
        wait_s=wait,
        tokens=tokens,
        work_s=prefill_work_s(ctx.prefill_fit.coefficients, length),
        chunks=prefill_chunks(length, budget),
        problem=problem,
    )
