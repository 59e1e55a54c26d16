"""The decode sweep (docs/design.md §4): cohorts of n streams started together, TPOT in their
overlap window.

A cohort whose window is too short, or during which the engine's metrics show waiting requests or KV
exhaustion, is recorded as invalid with its reason and left out of the fit. Every stream's chunk
times and token counts are kept, relative to the cohort's first send.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from narwhal_engine_client import EngineClientError, StreamRecord
from narwhal_fit import (
    DecodeFit,
    DecodePoint,
    FitError,
    NeedsMoreTokensError,
    StreamTimes,
    burst_share,
    cohort_tpot,
    decode_window,
    fit_decode,
)
from narwhal_profile_cli._errors import ProfileAbortError
from narwhal_profile_cli._progress import Progress, cohort_weight
from narwhal_profile_cli.sweeps._metrics_watch import MetricsWatch, Observation
from narwhal_profile_cli.sweeps._preflight import EngineProbe
from narwhal_profile_cli.sweeps._prompts import PromptFactory
from narwhal_profile_cli.sweeps._requests import (
    OnWire,
    PreparedRequest,
    RequestIds,
    fresh_connections,
    prepare,
    transport_failure,
    verify,
)
from narwhal_store import DecodeStream, Remeasured


@dataclass(frozen=True, slots=True)
class StreamTrace:
    """One decode stream's times (ns, relative to the cohort's first send) and token counts;
    ``resends`` is 1 when it was resent after a kept-alive connection closed unanswered."""

    request_id: str
    send_ns: int
    chunk_ns: list[int]
    chunk_tokens: list[int]
    resends: int = 0

    def record(self) -> DecodeStream:
        """The sidecar's record of the stream."""
        return DecodeStream(
            request_id=self.request_id,
            send_ns=self.send_ns,
            chunk_ns=self.chunk_ns,
            chunk_tokens=self.chunk_tokens,
            resends=self.resends,
        )


@dataclass(frozen=True, slots=True)
class Cohort:
    """One decode cohort and its verdict (``point`` is None when it is left out of the fit).

    ``intervals`` is the fewest in-window token intervals of any stream and ``burst_share`` the
    share of in-window chunk intervals that came in bursts (both None without a measured window).
    ``remeasured`` says why the cohort was measured a second time, when it was.
    """

    input_len: int
    concurrency: int
    repeat: int
    streams: list[StreamTrace]
    point: DecodePoint | None
    reason: str | None
    intervals: int | None = None
    burst_share: float | None = None
    remeasured: Remeasured | None = None


def traces(records: list[StreamRecord]) -> list[StreamTrace]:
    """Each record's times relative to the earliest send of ``records``."""
    origin = min(r.send_ns for r in records)
    return [
        StreamTrace(
            request_id=r.request_id,
            send_ns=r.send_ns - origin,
            chunk_ns=[t - origin for t in r.chunk_ns],
            chunk_tokens=list(r.chunk_tokens),
            resends=r.resends,
        )
        for r in records
    ]


@dataclass(frozen=True, slots=True)
class _Ended:
    """A cohort whose streams ended: what it was, its records and its metrics watch."""

    input_len: int
    concurrency: int
    repeat: int
    records: list[StreamRecord]
    watch: MetricsWatch
    remeasured: Remeasured | None = None


def _cohort_requests(
    probe: EngineProbe,
    input_len: int,
    concurrency: int,
    output_tokens: int,
    prompts: PromptFactory,
    ids: RequestIds,
) -> Iterator[PreparedRequest]:
    """The cohort's requests, one at a time (so the caller can yield between them)."""
    for _ in range(concurrency):
        yield prepare(
            probe,
            prompts.prompt(input_len),
            output_tokens,
            ids.next(probe.iid, f"d{input_len}x{concurrency}"),
        )


async def preconnect(probe: EngineProbe, count: int) -> None:
    """Keep ``count`` idle kept-alive connections, one per stream, so no stream waits for a
    connect."""
    try:
        await probe.client.preconnect(count)
    except EngineClientError as exc:
        raise ProfileAbortError(
            f"engine {probe.iid}: cannot open {count} connections for a decode cohort: {exc}",
            engine=probe.iid,
            code="engine_error",
        ) from exc


async def _stream_all(
    probe: EngineProbe,
    requests: list[PreparedRequest],
    clock_ns: Callable[[], int],
    on_sent: Callable[[], None],
    opening: list[Observation],
) -> tuple[list[StreamRecord], MetricsWatch]:
    client = probe.client
    await preconnect(probe, len(requests))  # a no-op when the previous ramp opened them
    async with MetricsWatch(client, clock_ns, observations=list(opening)) as watch:
        records = await asyncio.gather(
            *(
                client.stream_completion(r.body, request_id=r.request_id, on_sent=on_sent)
                for r in requests
            )
        )
    return list(records), watch


def _send_skew(records: list[StreamRecord]) -> str | None:
    """Why streams did not overlap when the client itself started them far apart: the sends
    spread over more than a quarter of the shortest stream's own duration."""
    sends = [r.send_ns for r in records]
    spread = max(sends) - min(sends)
    durations = [r.chunk_ns[-1] - r.send_ns for r in records if r.chunk_ns]
    if not durations or spread <= min(durations) / 4:
        return None
    return (
        f"the client sent the {len(records)} streams {spread / 1e6:.1f} ms apart (a stream lasted "
        f"{min(durations) / 1e6:.1f} ms): they were never started together, so more tokens may "
        "not help; the client machine was too busy"
    )


def _judge(ended: _Ended) -> Cohort:
    """The cohort's window, TPOT and verdict (its requests were verified already)."""
    input_len, concurrency = ended.input_len, ended.concurrency
    records, watch = ended.records, ended.watch
    streams = [StreamTimes.from_chunks(r.chunk_ns, r.chunk_tokens) for r in records]
    window = decode_window(streams)
    reasons = watch.problems(window.start_ns, window.end_ns)
    point: DecodePoint | None = None
    intervals: int | None = None
    bursts: float | None = None
    try:
        tpot = cohort_tpot(streams, window)
    except NeedsMoreTokensError as exc:
        queued = watch.max_waiting()
        if queued > 0:
            reasons.append(
                f"the engine's metrics show up to {queued:g} of the {concurrency} streams "
                "waiting (its batch or KV cache was full)"
            )
        skew = _send_skew(records)
        if skew is not None:
            reasons.append(skew)
        reasons.append(str(exc))
    else:
        intervals = tpot.intervals_per_stream
        chunks = [(r.chunk_ns, r.chunk_tokens) for r in records]
        bursts = burst_share(chunks, window, tpot.per_stream)
        if not reasons:
            point = tpot.decode_point(input_len)
    return Cohort(
        input_len=input_len,
        concurrency=concurrency,
        repeat=ended.repeat,
        streams=traces(records),
        point=point,
        reason="; ".join(reasons) if reasons else None,
        intervals=intervals,
        burst_share=bursts,
        remeasured=ended.remeasured,
    )


@dataclass(frozen=True, slots=True)
class Chores:
    """Work to run once while the engine prefills a cohort whose ramp is long enough.

    ``ramp_s(input_len, concurrency)`` estimates how long the engine takes to prefill every stream
    of a cohort (no timing inside that ramp is measured: the window opens at the last stream's
    first token); ``work`` runs in the first cohort whose estimate reaches ``min_ramp_s``.
    """

    work: Callable[[], None]
    ramp_s: Callable[[int, int], float]
    min_ramp_s: float = 2.0


async def run_decode(
    probe: EngineProbe,
    input_lens: tuple[int, ...],
    concurrencies: tuple[int, ...],
    repeats: int,
    output_tokens: int,
    prompts: PromptFactory,
    ids: RequestIds,
    progress: Progress,
    clock_ns: Callable[[], int],
    chores: Chores | None = None,
) -> list[Cohort]:
    """Every cohort of the sweep, valid or not, with no idle engine between cohorts.

    Once a cohort's streams are on the wire, while the engine prefills them, the previous cohort
    is judged, the next cohort's prompts and bodies are built (one request at a time, yielding
    in between) and the connections it lacks are opened, and ``chores`` run in the first ramp
    long enough for them. Each cohort's requests are verified as soon as it ends, so a failed
    request aborts before the next cohort is sent; a cohort that failed for a transport reason is
    first measured once more, on new connections (``Cohort.remeasured``).
    """
    plan = [
        (input_len, n, repeat)
        for input_len in input_lens
        for n in concurrencies
        for repeat in range(repeats)
    ]
    cohorts: list[Cohort] = []
    if not plan:
        return cohorts
    first_len, first_n, _ = plan[0]
    upcoming = list(_cohort_requests(probe, first_len, first_n, output_tokens, prompts, ids))
    ended: _Ended | None = None
    pending_chores = chores
    for index, (input_len, n, repeat) in enumerate(plan):
        label = f"input {input_len} x {n} streams, repeat {repeat + 1}/{repeats}"
        progress.update(probe.iid, "decode", label)
        on_wire = OnWire(n)
        requests = upcoming
        opening = [] if ended is None else ended.watch.last()
        task = asyncio.create_task(_stream_all(probe, requests, clock_ns, on_wire, opening))
        try:
            await on_wire.wait(task)
            if ended is not None:
                cohorts.append(_judge(ended))
                ended = None
            if pending_chores is not None and pending_chores.ramp_s(input_len, n) >= (
                pending_chores.min_ramp_s
            ):
                pending_chores.work()
                pending_chores = None
            if index + 1 < len(plan):
                next_len, next_n, _ = plan[index + 1]
                upcoming = []
                for request in _cohort_requests(
                    probe, next_len, next_n, output_tokens, prompts, ids
                ):
                    upcoming.append(request)
                    await asyncio.sleep(0)
                # this cohort's connections come back idle when it ends: open only the rest now,
                # so no connect falls between two cohorts
                await preconnect(probe, max(0, next_n - n))
            records, watch = await task
        except BaseException:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            raise
        failure = transport_failure(records)
        if failure is not None:
            progress.update(probe.iid, "decode", f"{label}: measured again ({failure.reason})")
            await fresh_connections(probe)
            requests = list(_cohort_requests(probe, input_len, n, output_tokens, prompts, ids))
            records, watch = await _stream_all(probe, requests, clock_ns, OnWire(n), watch.last())
        for request, record in zip(requests, records, strict=True):
            verify(probe, request, record)
        ended = _Ended(input_len, n, repeat, records, watch, failure)
        progress.update(probe.iid, "decode", label, done=cohort_weight(input_len, n, output_tokens))
    if ended is not None:
        cohorts.append(_judge(ended))
    if pending_chores is not None:
        pending_chores.work()
    return cohorts


def fit_cohorts(iid: str, cohorts: list[Cohort]) -> DecodeFit:
    """Fit the valid cohorts; too few usable points abort naming the engine and the reasons."""
    usable = [c for c in cohorts if c.point is not None]
    levels = sorted({c.concurrency for c in usable})
    lengths = sorted({c.input_len for c in usable})
    if len(levels) < 2 or len(lengths) < 2:
        invalid = [c for c in cohorts if c.point is None]
        shown = "; ".join(f"input {c.input_len} x {c.concurrency}: {c.reason}" for c in invalid[:3])
        more = f" (and {len(invalid) - 3} more)" if len(invalid) > 3 else ""
        raise ProfileAbortError(
            f"engine {iid}: usable decode cohorts cover concurrency levels {levels} and input "
            f"lengths {lengths}; at least two of each are required. Invalid cohorts: "
            f"{shown}{more}",
            engine=iid,
            code="decode_points",
        )
    try:
        return fit_decode([c.point for c in usable if c.point is not None])
    except FitError as exc:
        raise ProfileAbortError(
            f"engine {iid}: the decode fit failed: {exc}", engine=iid, code="decode_fit"
        ) from exc
