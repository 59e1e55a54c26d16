"""Exact per-chunk token counts: what the engine is asked for, and what a stream whose
counts are missing or do not add up becomes, on both stream transports.

vLLM sends several tokens per chunk with ``--stream-interval N`` and when its API server falls
behind; a chunk is never assumed to be one token.
"""

from __future__ import annotations

import json

import pytest

from narwhal_engine_client import (
    EngineProtocolError,
    StreamCutError,
    completion_body,
    token_counting,
    version_tuple,
)

from .test_ec_transports import TRANSPORTS, sse_answer, stream


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        ("0.33.0", "token_ids"),
        ("0.32.0+cpu", "token_ids"),
        ("v0.10.2", "token_ids"),
        ("0.10.2rc1", "token_ids"),
        ("0.10.1.1", "usage"),
        ("0.9.2", "usage"),
        ("unknown", "both"),
        ("", "both"),
        (None, "both"),
    ],
)
def test_token_counting_by_engine_version(version, expected):
    """return_token_ids from 0.10.2 on, continuous usage before, both for an unknown version."""
    assert token_counting(version) == expected


def test_version_tuple():
    assert version_tuple("0.11") == (0, 11, 0)
    assert version_tuple("1.2.3.dev4") == (1, 2, 3)
    assert version_tuple("dev") is None


@pytest.mark.parametrize(
    ("counting", "token_ids", "continuous"),
    [
        (None, False, False),
        ("token_ids", True, False),
        ("usage", False, True),
        ("both", True, True),
    ],
)
def test_body_asks_for_the_counting(counting, token_ids, continuous):
    """The body carries return_token_ids and/or continuous_usage_stats, include_usage always."""
    body = json.loads(completion_body(model="m", prompt=[1], max_tokens=4, token_counting=counting))
    assert body.get("return_token_ids", False) is token_ids
    options = body["stream_options"]
    assert options["include_usage"] is True
    assert options.get("continuous_usage_stats", False) is continuous


@TRANSPORTS
async def test_four_tokens_per_chunk_counted_from_token_ids(serve, sse, transport):
    """--stream-interval 4: 24 tokens in 7 chunks (first alone) count 24, never 7."""
    parts = [sse.chunk_033("a", token_ids=[1])]
    parts += [sse.chunk_033("abcd", token_ids=[1, 2, 3, 4]) for _ in range(4)]
    parts += [sse.chunk_033("abc", token_ids=[1, 2, 3])]
    parts += [sse.chunk_033("abcd", finish="length", token_ids=[1, 2, 3, 4])]
    parts += [sse.usage_chunk(3, 24), sse.DONE]
    rec = await stream(await serve(sse_answer(parts)), transport)
    assert rec.ok and rec.counted
    assert rec.chunk_tokens == [1, 4, 4, 4, 4, 3, 4]
    assert rec.completion_tokens == 24


@TRANSPORTS
async def test_chunk_sum_differs_from_usage_is_a_protocol_error(serve, sse, transport):
    """Chunks carrying 3 tokens against usage.completion_tokens 4: an error, never a measurement."""
    parts = [
        sse.chunk_033("a", token_ids=[1]),
        sse.chunk_033("b", finish="length", token_ids=[2, 3]),
        sse.usage_chunk(3, 4),
        sse.DONE,
    ]
    rec = await stream(await serve(sse_answer(parts)), transport)
    assert not rec.ok
    assert isinstance(rec.error, EngineProtocolError)
    assert "carried 3 tokens but usage.completion_tokens is 4" in str(rec.error)
    assert rec.chunk_tokens == [1, 2]  # kept exactly as received


@TRANSPORTS
async def test_chunks_without_counts_are_flagged_not_guessed(serve, sse, transport):
    """No token_ids and no continuous usage: the record says its per-chunk counts are guesses."""
    parts = [
        sse.chunk_033("a", token_ids=None),
        sse.chunk_033("bcd", finish="length", token_ids=None),
        sse.usage_chunk(3, 4),
        sse.DONE,
    ]
    rec = await stream(await serve(sse_answer(parts)), transport)
    assert rec.ok and not rec.counted
    assert rec.uncounted_chunks == 2
    assert rec.completion_tokens == 4  # the usage count, unaffected
    assert rec.tpot_s is not None  # first to last token over the usage count


@TRANSPORTS
async def test_no_usage_and_no_counts_is_a_protocol_error(serve, sse, transport):
    """Without a usage chunk and without per-chunk counts the output token count is unknown."""
    parts = [sse.chunk_033("a", token_ids=None), sse.chunk_033("b", token_ids=None), sse.DONE]
    rec = await stream(await serve(sse_answer(parts)), transport)
    assert isinstance(rec.error, EngineProtocolError)
    assert "output token count is unknown" in str(rec.error)


@TRANSPORTS
async def test_cut_stream_keeps_the_tokens_it_got(serve, sse, transport):
    """A stream cut after chunks of 1 and 4 tokens records completion_tokens 5, not None."""
    parts = [sse.chunk_033("a", token_ids=[1]), sse.chunk_033("abcd", token_ids=[1, 2, 3, 4])]
    rec = await stream(await serve(sse_answer(parts, terminate=False)), transport)
    assert isinstance(rec.error, StreamCutError)
    assert rec.completion_tokens == 5


@TRANSPORTS
async def test_continuous_usage_counts_merged_chunks(serve, sse, transport):
    """An old engine (usage counting): a merged chunk's count is the growth of the usage."""

    def usage(n: int) -> dict[str, int]:
        return {"prompt_tokens": 3, "total_tokens": 3 + n, "completion_tokens": n}

    parts = [
        sse.chunk_033("a", token_ids=None, usage=usage(1)),
        sse.chunk_033("bcde", token_ids=None, usage=usage(5)),
        sse.chunk_033("f", finish="length", token_ids=None, usage=usage(6)),
        sse.usage_chunk(3, 6),
        sse.DONE,
    ]
    rec = await stream(await serve(sse_answer(parts)), transport)
    assert rec.ok and rec.counted
    assert rec.chunk_tokens == [1, 4, 1] and rec.completion_tokens == 6


@TRANSPORTS
@pytest.mark.parametrize("empty_ids", [None, []])
async def test_closing_zero_token_chunk_is_not_content(serve, sse, transport, empty_ids):
    """Dynamo's frontend closes a stream with an empty ``finish_reason`` chunk whose usage did not
    grow (or whose token_ids are empty): no token arrived with it, so it is no content chunk and
    the last token's time stays the third chunk's."""

    def usage(n: int) -> dict[str, int]:
        return {"prompt_tokens": 3, "total_tokens": 3 + n, "completion_tokens": n}

    parts = [sse.chunk_033(w, token_ids=None, usage=usage(k)) for k, w in enumerate("abc", 1)]
    parts += [sse.chunk_033("", finish="length", token_ids=empty_ids, usage=usage(3))]
    parts += [sse.DONE]
    rec = await stream(await serve(sse_answer(parts)), transport)
    assert rec.ok and rec.counted
    assert rec.chunk_tokens == [1, 1, 1] and len(rec.chunk_ns) == 3
    assert rec.completion_tokens == 3 and rec.finish_reason == "length"
    assert rec.last_token_ns == rec.chunk_ns[2]
