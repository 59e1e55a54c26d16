"""Both stream transports against the simulated vLLM engines (0.11 and 0.33 styles) agree.

The same completion, and the same injected faults (cut stream, mid-stream error event, HTTP 503,
a prompt over the context limit), streamed once with httpx and once with the raw transport, must
give records that agree on everything but the times.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from narwhal_engine_client import (
    EngineClient,
    EngineHTTPError,
    EngineStreamError,
    StreamCutError,
    StreamRecord,
    completion_body,
)
from narwhal_sim.testing import SimFleet, sim_config, start_sim_fleet

ENGINES = ("e11", "e33")
TRANSPORTS = ("httpx", "raw")
TOKENS = 6


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimFleet]:
    """A 0.11-style engine (flat errors) and a 0.33-style engine (nested errors), fast preset."""
    engines = [{"iid": iid, "role": "mixed", "model": "m"} for iid in ENGINES]
    config = sim_config(
        {"preset": "flat-5ms", "jitter": 0.0, "max_model_len": 4096},
        e11={"api_style": "0.11", "error_shape": "flat"},
        e33={"api_style": "0.33", "error_shape": "nested"},
    )
    with start_sim_fleet(
        tmp_path_factory.mktemp("transports"), engines, sim_config=config, time_scale=0.2
    ) as sim:
        yield sim


def _comparable(rec: StreamRecord) -> dict[str, Any]:
    """Everything a record holds except the times (and the request id)."""
    error = rec.error
    return {
        "chunks": len(rec.chunk_ns),
        "chunk_tokens": rec.chunk_tokens,
        "http_status": rec.http_status,
        "prompt_tokens": rec.prompt_tokens,
        "completion_tokens": rec.completion_tokens,
        "finish_reason": rec.finish_reason,
        "token_ids": rec.token_ids,
        "bytes_sent": rec.bytes_sent,
        "bytes_received": rec.bytes_received,
        "ok": rec.ok,
        "error": None if error is None else (type(error).__name__, vars(error)),
    }


async def _both(url: str, body: bytes) -> dict[str, StreamRecord]:
    records = {}
    for n, transport in enumerate(TRANSPORTS):
        async with EngineClient(url, stream_transport=transport, timeout_s=30) as client:
            # same-length ids, so that bytes_received compares
            records[transport] = await client.stream_completion(
                body, request_id=f"req-{n}", keep_token_ids=True
            )
    return records


def _body(prompt_len: int = 64) -> bytes:
    return completion_body(
        model="m", prompt=list(range(100, 100 + prompt_len)), max_tokens=TOKENS,
        return_token_ids=True,
    )  # fmt: skip


@pytest.mark.parametrize("iid", ENGINES)
async def test_completion_records_agree(fleet, iid):
    """A normal completion: same tokens, usage, ids, bytes and outcome on both transports."""
    records = await _both(fleet.urls[iid], _body())
    assert records["raw"].ok and records["raw"].completion_tokens == TOKENS
    assert records["raw"].token_ids is not None and len(records["raw"].token_ids) == TOKENS
    assert _comparable(records["raw"]) == _comparable(records["httpx"])


@pytest.mark.parametrize("iid", ENGINES)
@pytest.mark.parametrize(
    ("faults", "error"),
    [
        ({"cut_after_tokens": 3}, StreamCutError),
        ({"stream_error_after_tokens": 2}, EngineStreamError),
        ({"http_error": {"status": 503, "rate": 1.0}}, EngineHTTPError),
    ],
)
async def test_fault_records_agree(fleet, iid, faults, error):
    """Cut streams, error events and HTTP errors give the same error on both transports."""
    await asyncio.to_thread(fleet.set_faults, iid, **faults)
    try:
        records = await _both(fleet.urls[iid], _body())
    finally:
        await asyncio.to_thread(fleet.set_faults, iid, **dict.fromkeys(faults))
    assert isinstance(records["raw"].error, error)
    raw, httpx = _comparable(records["raw"]), _comparable(records["httpx"])
    if error is StreamCutError:  # the wording names the underlying failure, which differs
        raw.pop("error")
        httpx.pop("error")
    assert raw == httpx


@pytest.mark.parametrize("iid", ENGINES)
async def test_context_overflow_records_agree(fleet, iid):
    """A prompt over max_model_len: the engine's own 400 (or clamped answer) on both."""
    records = await _both(fleet.urls[iid], _body(prompt_len=5000))
    assert _comparable(records["raw"]) == _comparable(records["httpx"])
