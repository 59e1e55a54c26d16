"""stream_completion against respx-mocked engines in the vLLM 0.11 and 0.33 payload layouts."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
import respx

from narwhal_engine_client import (
    EngineClient,
    EngineConnectError,
    EngineHTTPError,
    EngineProtocolError,
    EngineStreamError,
    EngineTimeoutError,
    StreamCutError,
    completion_body,
)

from .conftest import HTTP_ERROR_CASES

BASE = "http://engine.test"
BODY = completion_body(model="llama", prompt=[1, 2, 3], max_tokens=4)


async def _run(parts, clock, *, fail_with=None, keep=False, sse=None, **kw):
    with respx.mock(base_url=BASE) as mock:
        route = mock.post("/v1/completions").mock(return_value=sse.response(parts, fail_with))
        async with EngineClient(BASE, clock_ns=clock, **kw) as client:
            record = await client.stream_completion(BODY, request_id="req-1", keep_token_ids=keep)
    return record, route


async def test_stream_011_layout(sse, fake_clock):
    """0.11 chunks (usage null, prompt_token_ids first) then the usage chunk are recorded."""
    parts = [
        sse.chunk_011(" a", prompt_ids=[1, 2, 3]),
        sse.chunk_011(" b"),
        sse.chunk_011(" c"),
        sse.chunk_011(" d", finish="length"),
        sse.usage_chunk(3, 4),
        sse.DONE,
    ]
    rec, route = await _run(parts, fake_clock, sse=sse)
    assert rec.ok and rec.error is None
    assert rec.http_status == 200
    # clock: send=1000, then one reading per network read: 2000 ... 5000, 6000 (usage), 7000
    assert rec.send_ns == 1000
    assert rec.chunk_ns == [2000, 3000, 4000, 5000]
    assert rec.chunk_tokens == [1, 1, 1, 1]
    assert rec.first_token_ns == 2000 and rec.last_token_ns == 5000
    assert rec.end_ns == 7000
    assert (rec.prompt_tokens, rec.completion_tokens) == (3, 4)
    assert rec.finish_reason == "length"
    assert rec.ttft_s == pytest.approx(1000 / 1e9)
    assert rec.tpot_s == pytest.approx(3000 / 3 / 1e9)
    assert rec.e2e_s == pytest.approx(4000 / 1e9)
    assert rec.bytes_sent == len(BODY)
    assert rec.bytes_received == sum(len(p) for p in parts)
    assert rec.token_ids is None
    request = route.calls.last.request
    assert request.headers["x-request-id"] == "req-1"
    assert request.content == BODY


async def test_stream_033_layout_without_usage_chunk(sse, fake_clock):
    """0.33 chunks (no usage key) without a usage chunk: tokens counted as one per chunk."""
    parts = [
        sse.chunk_033(" a"),
        sse.chunk_033(" b"),
        sse.chunk_033(" c", finish="length", fingerprint=True),
        sse.DONE,
    ]
    rec, _ = await _run(parts, fake_clock, sse=sse)
    assert rec.ok
    assert rec.chunk_tokens == [1, 1, 1]
    assert rec.completion_tokens == 3
    assert rec.prompt_tokens is None
    assert rec.finish_reason == "length"


async def test_stream_033_layout_with_usage_chunk(sse, fake_clock):
    """0.33 chunks followed by the separate usage chunk take usage from that chunk."""
    parts = [sse.chunk_033(" a"), sse.chunk_033(" b", finish="length"), sse.usage_chunk(7, 2)]
    rec, _ = await _run([*parts, sse.DONE], fake_clock, sse=sse)
    assert rec.ok
    assert (rec.prompt_tokens, rec.completion_tokens) == (7, 2)
    assert rec.tpot_s == pytest.approx(1000 / 1 / 1e9)


async def test_token_ids_count_several_tokens_per_chunk(sse, fake_clock):
    """token_ids deltas give the exact count when one chunk carries several tokens."""
    parts = [
        sse.chunk_011("abc", prompt_ids=[1, 2, 3], token_ids=[5, 6, 7]),
        sse.chunk_011("d", token_ids=[8]),
        sse.chunk_011("ef", finish="length", token_ids=[9, 10]),
        sse.usage_chunk(3, 6),
        sse.DONE,
    ]
    rec, _ = await _run(parts, fake_clock, keep=True, sse=sse)
    assert rec.ok
    assert rec.chunk_tokens == [3, 1, 2]
    assert rec.token_ids == [5, 6, 7, 8, 9, 10]
    assert rec.completion_tokens == 6
    # first chunk at 2000, last at 4000; 6 tokens → 5 intervals
    assert rec.tpot_s == pytest.approx(2000 / 5 / 1e9)


async def test_token_ids_without_usage_chunk_sum(sse, fake_clock):
    """Without a usage chunk, completion_tokens is the sum of token_ids deltas."""
    parts = [sse.chunk_033("ab", token_ids=[1, 2]), sse.chunk_033("c", token_ids=[3]), sse.DONE]
    rec, _ = await _run(parts, fake_clock, sse=sse)
    assert rec.ok and rec.completion_tokens == 3 and rec.chunk_tokens == [2, 1]


async def test_continuous_usage_stats_deltas(sse, fake_clock):
    """With continuous usage stats, each chunk's count is the growth of completion_tokens."""
    parts = [
        sse.chunk_033(
            "a",
            token_ids=None,
            usage={"prompt_tokens": 3, "total_tokens": 4, "completion_tokens": 1},
        ),
        sse.chunk_033(
            "bc",
            token_ids=None,
            usage={"prompt_tokens": 3, "total_tokens": 6, "completion_tokens": 3},
        ),
        sse.chunk_033(
            "d",
            finish="length",
            token_ids=None,
            usage={"prompt_tokens": 3, "total_tokens": 7, "completion_tokens": 4},
        ),
        sse.usage_chunk(3, 4),
        sse.DONE,
    ]
    rec, _ = await _run(parts, fake_clock, sse=sse)
    assert rec.ok
    assert rec.chunk_tokens == [1, 2, 1]
    assert (rec.prompt_tokens, rec.completion_tokens) == (3, 4)


async def test_events_split_across_reads_and_comments(sse, fake_clock):
    """Events split mid-line across reads, CRLF endings and keep-alive comments parse correctly."""
    whole = (
        b": keep-alive\r\n\r\n"
        + sse.chunk_033(" a").replace(b"\n", b"\r\n")
        + sse.chunk_033(" b", finish="length")
        + sse.DONE
    )
    cut1, cut2 = 30, len(whole) - 20
    parts = [whole[:cut1], whole[cut1:cut2], whole[cut2:]]
    rec, _ = await _run(parts, fake_clock, sse=sse)
    assert rec.ok
    assert rec.chunk_tokens == [1, 1]
    # the first event's line ends in the second read (clock 3000), the second's in the third (4000)
    assert rec.chunk_ns == [3000, 4000]
    assert rec.end_ns == 4000


async def test_mid_stream_error_event(sse, fake_clock):
    """A data: {"error": ...} event (json.dumps spacing) becomes EngineStreamError with its code."""
    err = json.dumps(
        {"error": {"message": "Internal server error", "type": "x", "param": None, "code": 500}}
    )
    parts = [sse.chunk_011(" a"), f"data: {err}\n\n".encode(), sse.DONE]
    rec, _ = await _run(parts, fake_clock, sse=sse)
    assert not rec.ok
    assert isinstance(rec.error, EngineStreamError)
    assert rec.error.message == "Internal server error"
    assert rec.error.code == 500
    assert rec.chunk_tokens == [1]
    assert rec.end_ns == 3000


async def test_stream_without_done_is_cut(sse, fake_clock):
    """A stream that closes before [DONE] is recorded as StreamCutError, keeping its chunks."""
    rec, _ = await _run([sse.chunk_011(" a"), sse.chunk_011(" b")], fake_clock, sse=sse)
    assert not rec.ok
    assert isinstance(rec.error, StreamCutError)
    assert rec.chunk_ns == [2000, 3000]
    assert rec.ttft_s == pytest.approx(1000 / 1e9)


async def test_connection_broken_mid_stream_is_cut(sse, fake_clock):
    """A transport error while reading the body is a StreamCutError."""
    boom = httpx.RemoteProtocolError("peer closed connection without sending complete message body")
    rec, _ = await _run([sse.chunk_011(" a")], fake_clock, fail_with=boom, sse=sse)
    assert isinstance(rec.error, StreamCutError)
    assert "RemoteProtocolError" in str(rec.error)


async def test_unparseable_event_is_protocol_error(sse, fake_clock):
    """An event that is not JSON is an EngineProtocolError."""
    rec, _ = await _run([b"data: {not json\n\n", sse.DONE], fake_clock, sse=sse)
    assert isinstance(rec.error, EngineProtocolError)


@pytest.mark.parametrize(
    "payload",
    [
        b'data: ["a"]\n\n',
        b'data: {"choices": ["x"]}\n\n',
        b'data: {"choices": [{"token_ids": 3}]}\n\n',
    ],
)
async def test_ill_typed_event_is_protocol_error(sse, fake_clock, payload):
    """Events of the wrong shape are recorded as EngineProtocolError, never raised."""
    rec, _ = await _run([payload, sse.DONE], fake_clock, sse=sse)
    assert isinstance(rec.error, EngineProtocolError)


async def test_done_without_content_is_protocol_error(sse, fake_clock):
    """[DONE] with no content chunk is not a success (vllm bench serve marks it failed too)."""
    rec, _ = await _run([sse.usage_chunk(3, 0), sse.DONE], fake_clock, sse=sse)
    assert isinstance(rec.error, EngineProtocolError)
    assert not rec.ok


@pytest.mark.parametrize(("status", "payload", "message", "error_type"), HTTP_ERROR_CASES)
async def test_http_error_shapes(sse, fake_clock, status, payload, message, error_type):
    """Nested, flat and 401 error bodies give EngineHTTPError with the engine's message."""
    with respx.mock(base_url=BASE) as mock:
        mock.post("/v1/completions").mock(return_value=httpx.Response(status, json=payload))
        async with EngineClient(BASE, clock_ns=fake_clock) as client:
            rec = await client.stream_completion(BODY, request_id="r")
    assert rec.http_status == status
    assert isinstance(rec.error, EngineHTTPError)
    assert (rec.error.status, rec.error.message, rec.error.error_type) == (
        status,
        message,
        error_type,
    )
    assert rec.chunk_ns == [] and rec.end_ns is not None and not rec.ok


async def test_bearer_key_sent_only_when_configured(sse, fake_clock):
    """Without a key the engine answers 401; with one the Authorization header carries it."""

    def auth(request: httpx.Request) -> httpx.Response:
        if request.headers.get("authorization") != "Bearer sk-test-123":
            return httpx.Response(401, json={"error": "Unauthorized"})
        return sse.response([sse.chunk_033(" a", finish="length"), sse.DONE])

    with respx.mock(base_url=BASE) as mock:
        route = mock.post("/v1/completions").mock(side_effect=auth)
        async with EngineClient(BASE, clock_ns=fake_clock) as anonymous:
            denied = await anonymous.stream_completion(BODY, request_id="a")
        async with EngineClient(BASE, api_key="sk-test-123", clock_ns=fake_clock) as keyed:
            allowed = await keyed.stream_completion(BODY, request_id="b")
    assert isinstance(denied.error, EngineHTTPError) and denied.error.status == 401
    assert "authorization" not in route.calls[0].request.headers
    assert allowed.ok
    assert route.calls[1].request.headers["authorization"] == "Bearer sk-test-123"


async def test_mapping_body_is_encoded(sse, fake_clock):
    """A mapping body is JSON-encoded and its size counted."""
    with respx.mock(base_url=BASE) as mock:
        route = mock.post("/v1/completions").mock(
            return_value=sse.response([sse.chunk_033("x", finish="length"), sse.DONE])
        )
        async with EngineClient(BASE, clock_ns=fake_clock) as client:
            rec = await client.stream_completion({"model": "m", "prompt": "hi"}, request_id="r")
    sent = route.calls.last.request.content
    assert json.loads(sent) == {"model": "m", "prompt": "hi"}
    assert rec.bytes_sent == len(sent)


async def test_read_timeout_is_recorded(fake_clock):
    """An httpx timeout becomes EngineTimeoutError in the record, not an exception."""
    with respx.mock(base_url=BASE) as mock:
        mock.post("/v1/completions").mock(side_effect=httpx.ReadTimeout("read timed out"))
        async with EngineClient(BASE, clock_ns=fake_clock) as client:
            rec = await client.stream_completion(BODY, request_id="r")
    assert isinstance(rec.error, EngineTimeoutError)
    assert rec.http_status is None


async def test_request_deadline_is_recorded(sse):
    """A stream that stalls past the request deadline becomes EngineTimeoutError."""

    class Stall(httpx.AsyncByteStream):
        async def __aiter__(self):
            yield sse.chunk_033(" a")
            await asyncio.sleep(30)
            yield sse.DONE

    with respx.mock(base_url=BASE) as mock:
        mock.post("/v1/completions").mock(return_value=httpx.Response(200, stream=Stall()))
        async with EngineClient(BASE) as client:
            rec = await client.stream_completion(BODY, request_id="r", timeout_s=0.05)
    assert isinstance(rec.error, EngineTimeoutError)
    assert rec.chunk_tokens == [1]
    assert rec.http_status == 200


async def test_connection_refused_is_recorded(closed_port):
    """A closed loopback port gives EngineConnectError in the record."""
    async with EngineClient(f"http://127.0.0.1:{closed_port}", timeout_s=5) as client:
        rec = await client.stream_completion(BODY, request_id="r")
    assert isinstance(rec.error, EngineConnectError)
    assert rec.http_status is None and rec.chunk_ns == [] and not rec.ok
