"""Several tokens per chunk from the simulated engines, on both stream transports.

Three engines stand in for what vLLM's own server does: ``--stream-interval 4`` (an output every 4
tokens, the first and the last alone), an API server that falls behind and merges 3 steps' outputs
into one chunk (``coalesce_mode: merge``), and one that writes them back to back as separate chunks
(``burst``). An old engine (0.9.2) knows no ``return_token_ids`` and is counted by continuous usage.
Every record must count exactly ``TOKENS`` tokens, whatever the chunking.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from narwhal_engine_client import (
    EngineClient,
    EngineProtocolError,
    StreamRecord,
    TokenCounting,
    completion_body,
)
from narwhal_sim.testing import SimFleet, sim_config, start_sim_fleet

TOKENS = 24
TRANSPORTS = ("httpx", "raw")


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimFleet]:
    """Four engines of the fast preset, each chunking differently."""
    iids = ("interval4", "merge3", "burst3", "old")
    engines = [{"iid": iid, "role": "mixed", "model": "m"} for iid in iids]
    config = sim_config(
        {"preset": "flat-5ms", "jitter": 0.0, "max_model_len": 4096},
        interval4={"stream_interval": 4},
        merge3={"coalesce_steps": 3, "coalesce_mode": "merge"},
        burst3={"coalesce_steps": 3, "coalesce_mode": "burst"},
        old={"version": "0.9.2", "stream_interval": 4},
    )
    with start_sim_fleet(
        tmp_path_factory.mktemp("chunking"), engines, sim_config=config, time_scale=0.5
    ) as sim:
        yield sim


async def _stream(
    url: str, transport: str, counting: TokenCounting | None, **kw: object
) -> StreamRecord:
    body = completion_body(
        model="m", prompt=list(range(200, 264)), max_tokens=TOKENS, token_counting=counting
    )
    async with EngineClient(url, stream_transport=transport, timeout_s=30) as client:
        return await client.stream_completion(body, request_id=f"chunking-{transport}", **kw)


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_stream_interval_four_counts_every_token(fleet, transport):
    """24 tokens in 7 chunks: 1, then 4 per chunk, the last 3 (first and last sent at once)."""
    rec = await _stream(fleet.urls["interval4"], transport, "token_ids", keep_token_ids=True)
    assert rec.ok and rec.counted
    assert rec.chunk_tokens == [1, 4, 4, 4, 4, 4, 3]
    assert rec.completion_tokens == TOKENS and rec.token_ids is not None
    assert len(rec.token_ids) == TOKENS


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_token_ids_only_when_asked(fleet, transport):
    """Without return_token_ids the chunks carry no ids: flagged as uncounted, never guessed."""
    rec = await _stream(fleet.urls["interval4"], transport, None)
    assert rec.ok and not rec.counted and rec.uncounted_chunks == 7
    assert rec.completion_tokens == TOKENS  # from the usage chunk


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_merged_steps_count_every_token(fleet, transport):
    """Outputs of 3 steps merged into one chunk: 3 tokens per chunk after the first."""
    rec = await _stream(fleet.urls["merge3"], transport, "token_ids")
    assert rec.ok and rec.counted and rec.completion_tokens == TOKENS
    assert rec.chunk_tokens[0] == 1 and set(rec.chunk_tokens[1:-1]) == {3}
    assert sum(rec.chunk_tokens) == TOKENS


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_burst_delivery_counts_every_token(fleet, transport):
    """One-token chunks written in bursts of 3: fewer distinct arrival times than chunks."""
    rec = await _stream(fleet.urls["burst3"], transport, "token_ids")
    assert rec.ok and rec.counted and rec.completion_tokens == TOKENS
    assert rec.chunk_tokens == [1] * TOKENS
    assert len(set(rec.chunk_ns)) < TOKENS  # whole bursts arrive in one network read


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_old_engine_counted_by_continuous_usage(fleet, transport):
    """vLLM 0.9.2 ignores return_token_ids; continuous usage still counts 4 tokens per chunk."""
    rec = await _stream(fleet.urls["old"], transport, "usage")
    assert rec.ok and rec.counted
    assert rec.chunk_tokens == [1, 4, 4, 4, 4, 4, 3]
    rec = await _stream(fleet.urls["old"], transport, "token_ids")
    assert rec.ok and not rec.counted  # it ignored the field: nothing to count by


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_usage_disagreeing_with_chunks_is_a_protocol_error(fleet, transport):
    """The usage chunk claims 2 more tokens than the chunks carried: a protocol error."""
    fleet.set_faults("interval4", usage_excess_tokens=2)
    try:
        rec = await _stream(fleet.urls["interval4"], transport, "token_ids")
    finally:
        fleet.set_faults("interval4", usage_excess_tokens=None)
    assert isinstance(rec.error, EngineProtocolError)
    assert f"carried {TOKENS} tokens but usage.completion_tokens is {TOKENS + 2}" in str(rec.error)
