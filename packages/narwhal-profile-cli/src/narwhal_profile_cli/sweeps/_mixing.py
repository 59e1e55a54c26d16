"""The mixing points (``--mixing``; docs/design.md §13 "Mixing points") run against an engine:
how much of a prefill's time lands on the streams it is decoding.

Run after the decode sweep, with the engine's prefill and decode fits at hand, each point as
``_mixing_plan`` sizes it (:func:`~narwhal_profile_cli.sweeps._mixing_plan.plan_point`):
``concurrency`` decode streams start together; once they all decode (the prefill fit's estimate
of their ramp, with a margin) and a quiet stretch has passed, ``prefills`` one-token prompts of
the mixing length go out a few TTFTs apart. The time each stream lost per prefill is
narwhal-fit's :func:`~narwhal_fit.mixing_loss`. The valid points are fitted
(``mixing-share-step-v1``, :func:`~narwhal_profile_cli.sweeps._mixing_plan.fit_runs`).

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
from collections.abc import Callable
from dataclasses import dataclass

from narwhal_engine_client import StreamRecord
from narwhal_fit import DecodeFit, InsufficientDataError, PrefillFit, StreamTimes, mixing_loss
from narwhal_profile_cli._errors import ProfileAbortError
from narwhal_profile_cli._options import MixingOptions
from narwhal_profile_cli._progress import Progress, mixing_weight
from narwhal_profile_cli.sweeps._decode import preconnect, traces
from narwhal_profile_cli.sweeps._metrics_watch import KV_EXHAUSTED, MetricsWatch, Observation
from narwhal_profile_cli.sweeps._mixing_plan import (
    MixingContext,
    MixingResult,
    MixingRun,
    PointPlan,
    fit_runs,
    mixing_concurrency,
    plan_point,
    plan_points,
)
from narwhal_profile_cli.sweeps._prefill import PrefillTimings
from narwhal_profile_cli.sweeps._preflight import EngineProbe, SweepPoints
from narwhal_profile_cli.sweeps._prompts import PromptFactory
from narwhal_profile_cli.sweeps._requests import (
    OnWire,
    PreparedRequest,
    RequestIds,
    prepare,
    transport_failure,
    verify,
)
from narwhal_store import InjectedPrefill

__all__ = ["run_mixing"]


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
    ctx = MixingContext(probe, prefill, prefill_fit, decode_fit, budget)
    n = mixing_concurrency(options.concurrency, points.limit)
    runs: list[MixingRun] = []
    opening: list[Observation] = []
    plan = plan_points(points, options)
    for input_len, length, repeat in plan:
        point = plan_point(ctx, input_len, n, length, options.prefills)
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


def _refused(point: PointPlan, repeat: int) -> MixingRun:
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
    ctx: MixingContext,
    point: PointPlan,
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
    ctx: MixingContext, point: PointPlan, repeat: int, sent: _Sent, watch: MetricsWatch
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


def _loss(point: PointPlan, sent: _Sent, watch: MetricsWatch, reasons: list[str]) -> float | None:
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
