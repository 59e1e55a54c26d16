"""The mixing points (``--mixing``; docs/design.md §13 "Mixing points"): how much of a prefill's
time lands on the streams an engine is decoding.

Run after the decode sweep, with the engine's prefill and decode fits at hand. Per decode input
length, mixing prefill length and repeat, one point: ``concurrency`` decode streams start
together; once they all decode (the prefill fit's estimate of their ramp, with a margin) and a
quiet stretch has passed (:data:`QUIET_INTERVALS` of their intervals by the decode fit, at least
:data:`MIN_QUIET_S`), ``prefills`` one-token prompts of the mixing length go out
:data:`INTERVAL_TTFTS` TTFTs apart. The time each stream lost per prefill is narwhal-fit's
:func:`~narwhal_fit.mixing_loss`; the point's prefill work is ``b·L + c·L²`` by the prefill fit and
its chunks ``⌈L / max_num_batched_tokens⌉`` (:func:`plan_budget`). The valid points are fitted
(``mixing-share-step-v1``).

A point is kept, invalid with its reason and out of the fit, when the streams could not decode
through every prefill within ``max_model_len`` (not sent at all), a prefill failed, a stream ended
before the last prefill's token, the streams did not all decode a quiet stretch before the first
prefill, or the engine's metrics show requests waiting (beyond the one injected prefill waiting
for its step), KV exhaustion or preemptions. A decode stream's failure is handled as in the decode
sweep: a transport failure invalidates the point, the engine's own refusal aborts. Nothing here
fails the sweep otherwise: too few valid points leave the profile without a mixing fit, with a
warning.
"""

from __future__ import annotations

import asyncio
import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from narwhal_engine_client import StreamRecord
from narwhal_fit import (
    DecodeFit,
    FitError,
    InsufficientDataError,
    MixingFit,
    MixingPoint,
    PrefillFit,
    StreamTimes,
    fit_mixing,
    mixing_loss,
    prefill_chunks,
    prefill_work_s,
)
from narwhal_profile_cli._decode_sweep import StreamTrace, preconnect, traces
from narwhal_profile_cli._errors import ProfileAbortError
from narwhal_profile_cli._metrics_watch import KV_EXHAUSTED, MetricsWatch, Observation
from narwhal_profile_cli._options import MixingOptions
from narwhal_profile_cli._prefill_sweep import PrefillTimings
from narwhal_profile_cli._preflight import EngineProbe, SweepPoints
from narwhal_profile_cli._progress import Progress, mixing_weight
from narwhal_profile_cli._prompts import PromptFactory
from narwhal_profile_cli._requests import (
    OnWire,
    PreparedRequest,
    RequestIds,
    prepare,
    transport_failure,
    verify,
)
from narwhal_store import EngineLimits, InjectedPrefill, MixingSample

__all__ = [
    "DEFAULT_BATCHED_TOKENS",
    "INTERVAL_TTFTS",
    "MIN_QUIET_S",
    "QUIET_INTERVALS",
    "RAMP_MARGIN",
    "TOKEN_MARGIN",
    "MixingResult",
    "MixingRun",
    "fit_runs",
    "mixing_concurrency",
    "mixing_lens",
    "mixing_work",
    "plan_budget",
    "run_mixing",
]

DEFAULT_BATCHED_TOKENS: Final = 8192
"""The per-step token budget chunks are counted with when the engine's ``max_num_batched_tokens``
is unknown (neither the engine nor the limits file gives it): the predictor's default."""

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


def plan_budget(plan: object, limits: EngineLimits | None = None) -> int | None:
    """The engine's per-step token budget (``max_num_batched_tokens``), or None when unknown.

    From the plan's scheduler settings when it has them (``plan.scheduler``, read from the engine
    or the limits file at preflight), else from the engine's ``limits`` entry, else None: chunks
    are then counted with :data:`DEFAULT_BATCHED_TOKENS` (8192, the predictor's default).
    """
    scheduler = getattr(plan, "scheduler", None)
    if scheduler is not None:
        value = scheduler.max_num_batched_tokens.value
        if value is not None:
            return int(value)
    if limits is not None and limits.max_num_batched_tokens is not None:
        return limits.max_num_batched_tokens
    return None


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


def _plan(points: SweepPoints, options: MixingOptions) -> list[tuple[int, int, int]]:
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
        for input_len, length, _ in _plan(points, options)
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
class _Point:
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
class _Context:
    """What every point of one engine shares."""

    probe: EngineProbe
    prefill: list[PrefillTimings]
    prefill_fit: PrefillFit
    decode_fit: DecodeFit
    budget: int | None


def _ttft_s(ctx: _Context, length: int) -> float:
    """The median TTFT measured at ``length`` in the prefill sweep, else the prefill fit's."""
    for sample in ctx.prefill:
        if sample.length == length and sample.ttft_s:
            return float(statistics.median(sample.ttft_s))
    return ctx.prefill_fit.predict(length)


def _point(ctx: _Context, input_len: int, n: int, length: int, prefills: int) -> _Point:
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
    return _Point(
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


async def run_mixing(
    probe: EngineProbe,
    points: SweepPoints,
    options: MixingOptions,
    *,
    prefill: list[PrefillTimings],
    prefill_fit: PrefillFit,
    decode_fit: DecodeFit,
    budget: int | None,
    prompts: PromptFactory,
    ids: RequestIds,
    progress: Progress,
    clock_ns: Callable[[], int],
) -> MixingResult:
    """Every mixing point of one engine, valid or not, and the fit of the valid ones."""
    ctx = _Context(probe, prefill, prefill_fit, decode_fit, budget)
    n = mixing_concurrency(options.concurrency, points.limit)
    runs: list[MixingRun] = []
    opening: list[Observation] = []
    plan = _plan(points, options)
    for input_len, length, repeat in plan:
        point = _point(ctx, input_len, n, length, options.prefills)
        label = (
            f"input {input_len} x {n} + {options.prefills} prefills of {length}, "
            f"repeat {repeat + 1}/{options.repeats}"
        )
        progress.update(probe.iid, "mixing", label)
        if point.problem is not None:
            runs.append(_refused(point, repeat))
        else:
            run, watch = await _measure(ctx, point, repeat, prompts, ids, clock_ns, opening)
            runs.append(run)
            opening = watch.last()
        work = mixing_weight(input_len, n, length, options.prefills)
        progress.update(probe.iid, "mixing", label, done=work)
    fit, why = fit_runs(runs)
    return MixingResult(runs, fit, why)


def _refused(point: _Point, repeat: int) -> MixingRun:
    return MixingRun(
        input_len=point.input_len,
        concurrency=point.concurrency,
        prefill_len=point.prefill_len,
        interval_s=point.interval_s,
        repeat=repeat,
        streams=[],
        prefills=[],
        work_s=point.work_s,
        chunks=point.chunks,
        loss_s=None,
        reason=point.problem,
    )


@dataclass(frozen=True, slots=True)
class _Sent:
    """A point's requests and what came back."""

    streams: list[PreparedRequest]
    records: list[StreamRecord]
    prefills: list[PreparedRequest]
    prefill_records: list[StreamRecord]


async def _measure(
    ctx: _Context,
    point: _Point,
    repeat: int,
    prompts: PromptFactory,
    ids: RequestIds,
    clock_ns: Callable[[], int],
    opening: list[Observation],
) -> tuple[MixingRun, MetricsWatch]:
    probe = ctx.probe
    iid = probe.iid
    tag = f"m{point.input_len}x{point.concurrency}"
    streams = [
        prepare(probe, prompts.prompt(point.input_len), point.tokens, ids.next(iid, tag))
        for _ in range(point.concurrency)
    ]
    prefills = [
        prepare(
            probe, prompts.prompt(point.prefill_len), 1, ids.next(iid, f"mp{point.prefill_len}")
        )
        for _ in range(point.prefills)
    ]
    await preconnect(probe, point.concurrency + 1)  # every stream, and the prefills one by one
    client = probe.client
    on_wire = OnWire(point.concurrency)
    async with MetricsWatch(client, clock_ns, observations=list(opening)) as watch:
        decoding = asyncio.ensure_future(
            asyncio.gather(
                *(
                    client.stream_completion(r.body, request_id=r.request_id, on_sent=on_wire)
                    for r in streams
                )
            )
        )
        injected: list[asyncio.Task[StreamRecord]] = []
        try:
            await on_wire.wait(decoding)
            start = clock_ns()
            for index, request in enumerate(prefills):
                due = start + round((point.wait_s + index * point.interval_s) * 1e9)
                delay = (due - clock_ns()) / 1e9
                if delay > 0:
                    await asyncio.sleep(delay)
                if decoding.done():  # the streams ended (or failed): nothing left to mix with
                    break
                injected.append(
                    asyncio.create_task(
                        client.stream_completion(request.body, request_id=request.request_id)
                    )
                )
            prefill_records = list(await asyncio.gather(*injected))
            records = list(await decoding)
        except BaseException:
            decoding.cancel()
            for task in injected:
                task.cancel()
            await asyncio.gather(decoding, *injected, return_exceptions=True)
            raise
    sent = _Sent(streams, records, prefills[: len(prefill_records)], prefill_records)
    return _judge(ctx, point, repeat, sent, watch), watch


def _judge(
    ctx: _Context, point: _Point, repeat: int, sent: _Sent, watch: MetricsWatch
) -> MixingRun:
    """The point's loss and verdict."""
    records = sent.records
    reasons: list[str] = []
    failure = transport_failure(records)
    if failure is not None:
        reasons.append(f"a decode stream failed for a transport reason: {failure.reason}")
    else:
        for request, record in zip(sent.streams, records, strict=True):
            verify(ctx.probe, request, record)  # the engine's own refusal aborts, as in the sweep
    origin = min(r.send_ns for r in records)
    injected = [
        InjectedPrefill(
            request_id=r.request_id,
            send_ns=r.send_ns - origin,
            first_ns=None if r.first_token_ns is None else r.first_token_ns - origin,
        )
        for r in sent.prefill_records
    ]
    prefills_ok = len(sent.prefill_records) == point.prefills
    if not prefills_ok:
        reasons.append(
            f"the streams ended after {len(sent.prefill_records)} of {point.prefills} prefills"
        )
    for request, record in zip(sent.prefills, sent.prefill_records, strict=True):
        try:
            verify(ctx.probe, request, record)
        except ProfileAbortError as exc:
            prefills_ok = False
            reasons.append(f"prefill {exc.message.removeprefix(f'engine {ctx.probe.iid}: ')}")
    loss: float | None = None
    if failure is None and prefills_ok and sent.prefill_records:
        loss = _loss(point, sent, watch, reasons)
    return MixingRun(
        input_len=point.input_len,
        concurrency=point.concurrency,
        prefill_len=point.prefill_len,
        interval_s=point.interval_s,
        repeat=repeat,
        streams=traces(records),
        prefills=injected,
        work_s=point.work_s,
        chunks=point.chunks,
        loss_s=loss,
        reason="; ".join(reasons) if reasons else None,
    )


def _loss(point: _Point, sent: _Sent, watch: MetricsWatch, reasons: list[str]) -> float | None:
    """The loss per prefill (None when it cannot be computed: the reason is added), and the
    reasons that invalidate it otherwise."""
    records = sent.records
    first_send = min(r.send_ns for r in sent.prefill_records)
    last_first = max(r.first_token_ns or r.send_ns for r in sent.prefill_records)
    streams = [StreamTimes.from_chunks(r.chunk_ns, r.chunk_tokens) for r in records]
    window_start = max(s.token_ns[0] for s in streams)
    window_end = min(s.token_ns[-1] for s in streams)
    quiet_ns = first_send - window_start
    if quiet_ns < point.quiet_s * 1e9 / 2:
        reasons.append(
            f"the streams all decoded only {quiet_ns / 1e6:.1f} ms before the first prefill "
            f"(a quiet stretch of {point.quiet_s * 1e3:.0f} ms was planned: they started slower "
            "than the prefill fit predicts)"
        )
    reasons.extend(_metrics_problems(watch, window_start, window_end, first_send, last_first))
    try:
        measured = mixing_loss(streams, first_send, last_first, len(sent.prefill_records))
    except InsufficientDataError as exc:
        reasons.append(str(exc))
        return None
    return measured.loss_s


def _metrics_problems(
    watch: MetricsWatch, start_ns: int, end_ns: int, first_send_ns: int, last_first_ns: int
) -> list[str]:
    """What the engine's metrics say against the point while every stream decoded
    (``[start_ns, end_ns]``): requests waiting beyond the one injected prefill that may wait for
    its step (a reading overlapping the prefills' stretch), a full KV cache, any preemption."""
    found: list[str] = []
    inside = [o for o in watch.observations if o.within(start_ns, end_ns)]
    excess = 0.0
    for o in inside:
        asked = o.t_ns if o.sent_ns is None else o.sent_ns
        allowed = 1.0 if o.t_ns >= first_send_ns and asked <= last_first_ns else 0.0
        if (o.waiting or 0.0) > allowed:
            excess = max(excess, o.waiting or 0.0)
    if excess > 0:
        found.append(
            f"the engine's metrics show {excess:g} waiting request(s) while the streams decoded "
            "(at most the one injected prefill may wait for its step)"
        )
    usage = max((o.kv_usage or 0.0 for o in inside), default=0.0)
    if usage >= KV_EXHAUSTED:
        found.append(f"the engine's KV cache was exhausted during the point (usage {usage:.0%})")
    counts = [o.preemptions for o in watch.observations if o.preemptions is not None]
    if counts and counts[-1] > counts[0]:
        found.append(
            f"the engine preempted {counts[-1] - counts[0]:g} request(s) during the point "
            "(KV cache exhausted)"
        )
    return found
