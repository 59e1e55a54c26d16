"""The prefill sweep (DESIGN §4): one request at a time, ``max_tokens = 1``, every raw TTFT kept.

The fit uses each length's median; the representative fit must pass the reference's gates
(20% mean error, 50% worst-point error), else the run aborts.
"""

from __future__ import annotations

from dataclasses import dataclass

from narwhal_fit import PrefillFit
from narwhal_profile_cli._errors import ProfileAbortError
from narwhal_profile_cli._prefill_gate import gated_prefill_fit
from narwhal_profile_cli._preflight import EngineProbe
from narwhal_profile_cli._progress import Progress, prefill_weight
from narwhal_profile_cli._prompts import PromptFactory
from narwhal_profile_cli._requests import RequestIds, prepare, verify


@dataclass(slots=True)
class PrefillTimings:
    """Every raw TTFT (seconds) at one length, with the request ids that produced them."""

    length: int
    ttft_s: list[float]
    request_ids: list[str]


async def warm_up(probe: EngineProbe, prompts: PromptFactory, ids: RequestIds, length: int) -> str:
    """One unscored request (CUDA graphs, caches), checked like every other; returns its id."""
    request = prepare(probe, prompts.prompt(length), 1, ids.next(probe.iid, "warmup"))
    record = await probe.client.stream_completion(request.body, request_id=request.request_id)
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
    """``repeats`` sequential single-token requests at each length."""
    samples: list[PrefillTimings] = []
    for length in lengths:
        timings = PrefillTimings(length, [], [])
        for repeat in range(repeats):
            progress.update(probe.iid, "prefill", f"L={length} repeat {repeat + 1}/{repeats}")
            request = prepare(probe, prompts.prompt(length), 1, ids.next(probe.iid, f"p{length}"))
            record = await probe.client.stream_completion(
                request.body, request_id=request.request_id
            )
            verify(probe, request, record)
            ttft = record.ttft_s
            if ttft is None or ttft <= 0:
                raise ProfileAbortError(
                    f"engine {probe.iid}: request {request.request_id} has no positive TTFT",
                    engine=probe.iid,
                    code="engine_error",
                )
            timings.ttft_s.append(ttft)
            timings.request_ids.append(request.request_id)
            progress.update(probe.iid, "prefill", f"L={length}", done=prefill_weight(length))
        samples.append(timings)
    return samples


def fit_and_gate(iid: str, samples: list[PrefillTimings]) -> PrefillFit:
    """Fit the per-length medians and apply the reference's gates (aborts name ``engine iid``)."""
    return gated_prefill_fit(
        {s.length: s.ttft_s for s in samples}, subject=f"engine {iid}", iid=iid
    )
