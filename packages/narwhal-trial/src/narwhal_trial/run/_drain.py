"""Waiting for the fleet to drain: the router's admission queue and resident work must read zero."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from typing import Literal

from narwhal_engine_client import EngineClient, EngineClientError
from narwhal_trial._clock import Clock
from narwhal_trial._errors import DrainError

DEFAULT_GAUGES = (
    "narwhal_router_admission_queue_depth",
    "narwhal_router_resident_requests",
    "vllm:num_requests_waiting",
    "vllm:num_requests_running",
)

DrainPreset = Literal["narwhal-router", "vllm", "dynamo", "none"]
DRAIN_PRESETS: dict[DrainPreset, tuple[str, ...]] = {
    # narwhal-sim's router: its queue and resident gauges, and the engines' vLLM gauges it sums
    "narwhal-router": DEFAULT_GAUGES,
    # a vLLM engine's own /metrics; also the vLLM production-stack router (vllm_router), whose
    # /metrics sets vllm:num_requests_running per backend from its own in-flight counts
    "vllm": ("vllm:num_requests_waiting", "vllm:num_requests_running"),
    # NVIDIA Dynamo's HTTP frontend (/metrics on its HTTP port)
    "dynamo": ("dynamo_frontend_queued_requests", "dynamo_frontend_inflight_requests"),
    # no drain check at all: a router without a usable /metrics page (drain it another way)
    "none": (),
}
"""``--drain-preset``: the gauges that must read 0, by what stands at ``--base``."""
DEFAULT_PRESET: DrainPreset = "narwhal-router"


async def wait_drained(
    client: EngineClient,
    gauges: Sequence[str],
    *,
    timeout_s: float,
    poll_s: float,
    clock: Clock,
) -> float:
    """Poll ``GET /metrics`` until the gauges present sum to zero; returns the seconds it took.

    None of the gauges on the page, an unreadable page, or the timeout passing raise DrainError.
    """
    start = clock()
    while True:
        try:
            snapshot = await client.metrics()
        except EngineClientError as exc:
            raise DrainError(f"cannot read {client.base_url}/metrics: {exc}") from exc
        present = {name: value for name in gauges if (value := snapshot.sum(name)) is not None}
        if not present:
            raise DrainError(
                f"none of the drain gauges ({', '.join(gauges)}) is on {client.base_url}/metrics"
            )
        total = math.fsum(present.values())
        elapsed = (clock() - start) / 1e9
        if total == 0:
            return elapsed
        if elapsed >= timeout_s:
            busy = ", ".join(f"{k}={v:g}" for k, v in present.items() if v)
            raise DrainError(f"the fleet did not drain within {timeout_s:g} s ({busy})")
        await asyncio.sleep(min(poll_s, max(0.0, timeout_s - elapsed)))
