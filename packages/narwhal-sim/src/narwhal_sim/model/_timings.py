"""One finished request's latencies, as vLLM's per-request histograms and trace spans see them.

vLLM's output processor takes them from the request's stamps (``RequestStateStats``): arrival
(the API server got the request), queued (the engine core got it), scheduled (first admitted to
the running batch), first token, last token. The simulator's stamps are loop times: ``arrival``,
``ready_at`` (after the API overhead), ``scheduled_at``, ``first_token_at``, ``last_token_at``.
Every duration is in simulated seconds (loop seconds times the device's time scale), computed
once here so that ``/metrics`` and the spans carry the same numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

from narwhal_sim.model._scheduler import SimRequest


@dataclass(frozen=True, slots=True)
class RequestTimings:
    """Simulated seconds and token counts of one request that finished normally."""

    ttft_s: float  # first token - arrival
    e2e_s: float  # last token - arrival
    queue_s: float  # scheduled - queued (never below 0)
    prefill_s: float  # first token - scheduled
    decode_s: float  # last token - first token
    inference_s: float  # last token - scheduled
    tpot_s: float  # decode / (completion_tokens - 1); 0 with one token
    prompt_tokens: int
    completion_tokens: int


def request_timings(request: SimRequest, scale: float) -> RequestTimings:
    """The timings of a finished ``request`` on a device of time scale ``scale``.

    The differences are taken in loop seconds and then scaled, the way the scheduler's own
    observers scale TTFT and e2e, so ``ttft_s`` and ``e2e_s`` equal what they observed.
    """
    first, last, scheduled = request.first_token_at, request.last_token_at, request.scheduled_at
    if first is None or last is None or scheduled is None:
        raise ValueError(f"request {request.rid} has not finished")
    decode = (last - first) * scale
    generated = request.generated
    return RequestTimings(
        ttft_s=(first - request.arrival) * scale,
        e2e_s=(last - request.arrival) * scale,
        queue_s=max(0.0, (scheduled - request.ready_at) * scale),
        prefill_s=(first - scheduled) * scale,
        decode_s=decode,
        inference_s=(last - scheduled) * scale,
        tpot_s=decode / (generated - 1) if generated > 1 else 0.0,
        prompt_tokens=request.prompt_len,
        completion_tokens=generated,
    )
