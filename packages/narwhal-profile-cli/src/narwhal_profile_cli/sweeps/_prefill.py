"""The prefill sweep (docs/design.md §4): one request at a time, ``max_tokens = 1``, every raw
TTFT kept.

The fit uses each length's median; the representative fit must pass the reference's gates
(narwhal-fit's ``gate_prefill``, ``_prefill_gate``), else the run aborts.
"""

from __future__ import annotations

import asyncio
import functools
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field

from narwhal_fit import PrefillFit
from narwhal_profile_cli._errors import ProfileAbortError
from narwhal_profile_cli._progress import Progress, prefill_weight
from narwhal_profile_cli.sweeps._prefill_gate import gated_prefill_fit
from narwhal_profile_cli.sweeps._preflight import EngineProbe
from narwhal_profile_cli.sweeps._prompts import PromptFactory
from narwhal_profile_cli.sweeps._requests import (
    OnWire,
    PreparedRequest,
    RequestIds,
    prepare,
    send_again,
    transport_failure,
    verify,
)
from narwhal_store import Remeasured


@dataclass(slots=True)
class PrefillTimings:
    """Every raw TTFT (seconds) at one length, with the request ids that produced them; the ids
    of requests resent after a kept-alive connection closed unanswered; repeats measured again
    after a transport failure."""

    length: int
    ttft_s: list[float]
    request_ids: list[str]
    resent: list[str] = field(default_factory=list)
    remeasured: list[Remeasured] = field(default_factory=list)


async def warm_up(probe: EngineProbe, prompts: PromptFactory, ids: RequestIds, length: int) -> str:
    """One unscored request (CUDA graphs, caches), checked like every other; returns its id. A
    transport failure is tried once more on new connections."""

    def build() -> PreparedRequest:
        return prepare(probe, prompts.prompt(length), 1, ids.next(probe.iid, "warmup"))

    request = build()
    record = await probe.client.stream_completion(request.body, request_id=request.request_id)
    if transport_failure([record]) is not None:
        request, record = await send_again(probe, build)
    verify(probe, request, record)
    return request.request_id


async def run_prefill(
    probe: EngineProbe,
    lengths: tuple[int, ...],
    repeats: int,
    prompts: PromptFactory,
    ids: RequestIds,
    progress: Progress,
) -> list[PrefillTimings]:
    """``repeats`` sequential single-token requests at each length.

    Each next request is built once the current one is on the wire, while the engine prefills it
    (lengths ascend, so building the next prompt takes a small share of the current TTFT). A
    repeat that fails for a transport reason is measured once more on new connections (recorded
    in ``remeasured``); a second failure aborts.
    """
    plan = [(length, repeat) for length in lengths for repeat in range(repeats)]
    samples = {length: PrefillTimings(length, [], []) for length in lengths}

    def build(length: int) -> PreparedRequest:
        return prepare(probe, prompts.prompt(length), 1, ids.next(probe.iid, f"p{length}"))

    upcoming = build(plan[0][0]) if plan else None
    for index, (length, repeat) in enumerate(plan):
        request = upcoming
        assert request is not None
        progress.update(probe.iid, "prefill", f"L={length} repeat {repeat + 1}/{repeats}")
        on_wire = OnWire()
        task = asyncio.create_task(
            probe.client.stream_completion(
                request.body, request_id=request.request_id, on_sent=on_wire
            )
        )
        try:
            await on_wire.wait(task)
            if index + 1 < len(plan):
                upcoming = build(plan[index + 1][0])
            record = await task
        except BaseException:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            raise
        failure = transport_failure([record])
        if failure is not None:
            request, record = await send_again(probe, functools.partial(build, length))
            samples[length].remeasured.append(failure)
        verify(probe, request, record)
        if record.resends:
            samples[length].resent.append(request.request_id)
        ttft = record.ttft_s
        if ttft is None or ttft <= 0:
            raise ProfileAbortError(
                f"engine {probe.iid}: request {request.request_id} has no positive TTFT",
                engine=probe.iid,
                code="engine_error",
            )
        samples[length].ttft_s.append(ttft)
        samples[length].request_ids.append(request.request_id)
        progress.update(probe.iid, "prefill", f"L={length}", done=prefill_weight(length))
    return list(samples.values())


def fit_and_gate(iid: str, samples: list[PrefillTimings]) -> PrefillFit:
    """Fit the per-length medians and apply the reference's gates (aborts name ``engine iid``)."""
    return gated_prefill_fit(
        {s.length: s.ttft_s for s in samples}, subject=f"engine {iid}", iid=iid
    )


def ramp_estimate(samples: list[PrefillTimings]) -> Callable[[int, int], float]:
    """Seconds the engine needs to prefill ``n`` prompts of ``input_len`` tokens: ``n`` times the
    median TTFT at the longest measured length not above ``input_len`` (0 when none is)."""
    medians = sorted((s.length, statistics.median(s.ttft_s)) for s in samples if s.ttft_s)

    def ramp(input_len: int, n: int) -> float:
        below = [ttft for length, ttft in medians if length <= input_len]
        return n * below[-1] if below else 0.0

    return ramp
