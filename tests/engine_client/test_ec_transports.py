"""stream_completion over real loopback sockets, the same cases on both stream transports.

Every test runs once with ``stream_transport="httpx"`` and once with ``"raw"`` against a scripted
HTTP/1.1 server in the test's event loop, and asserts the same record: the 0.11 and 0.33 layouts,
multi-token chunks, the usage chunk, continuous usage, a mid-stream error event, no ``[DONE]``, a
cut connection, the three error body shapes (``Content-Length``, chunked and read-until-close),
the bearer key, timeouts, refused connections, 64 concurrent streams and keep-alive reuse.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from narwhal_engine_client import (
    EngineClient,
    EngineConnectError,
    EngineHTTPError,
    EngineProtocolError,
    EngineStreamError,
    EngineTimeoutError,
    SendDeadlineError,
    StreamCutError,
    StreamRecord,
    completion_body,
)

from .conftest import HTTP_ERROR_CASES, Engine, Request, Respond

BODY = completion_body(model="llama", prompt=[1, 2, 3], max_tokens=4)
TRANSPORTS = pytest.mark.parametrize("transport", ["httpx", "raw"])
SSE_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
)


def chunk(data: bytes) -> bytes:
    """One HTTP/1.1 chunk."""
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def sse_answer(parts: list[bytes], *, terminate: bool = True, head: bytes = SSE_HEAD) -> Respond:
    """A chunked 200 answer: one HTTP chunk (and one drained write) per part."""

    async def respond(request: Request, writer: asyncio.StreamWriter) -> None:
        writer.write(head)
        for part in parts:
            writer.write(chunk(part))
            await writer.drain()
        if terminate:
            writer.write(b"0\r\n\r\n")
        else:
            writer.close()
        await writer.drain()

    return respond


def json_answer(status: int, payload: Any, *, framing: str = "length") -> Respond:
    """A JSON answer framed by Content-Length, chunked encoding, or closing the connection."""
    data = json.dumps(payload).encode()

    async def respond(request: Request, writer: asyncio.StreamWriter) -> None:
        head = f"HTTP/1.1 {status} Whatever\r\ncontent-type: application/json\r\n"
        if framing == "length":
            writer.write(f"{head}content-length: {len(data)}\r\n\r\n".encode() + data)
        elif framing == "chunked":
            writer.write(f"{head}transfer-encoding: chunked\r\n\r\n".encode())
            writer.write(chunk(data[:10]) + chunk(data[10:]) + b"0\r\n\r\n")
        else:
            writer.write(f"{head}connection: close\r\n\r\n".encode() + data)
            await writer.drain()
            writer.close()
        await writer.drain()

    return respond


async def stream(engine: Engine, transport: str, *, keep: bool = False, **kw: Any) -> StreamRecord:
    """One stream_completion of BODY on a fresh client."""
    timeout = kw.pop("timeout_s", 20.0)
    async with EngineClient(engine.url, stream_transport=transport, timeout_s=timeout, **kw) as c:
        return await c.stream_completion(BODY, request_id="req-1", keep_token_ids=keep)


def assert_times(rec: StreamRecord) -> None:
    """Send, chunk, first/last token and end times are ordered as the definitions require."""
    assert rec.chunk_ns == sorted(rec.chunk_ns)
    assert rec.first_token_ns is not None and rec.last_token_ns is not None
    assert rec.send_ns < rec.first_token_ns <= rec.last_token_ns
    assert rec.chunk_ns[0] == rec.first_token_ns and rec.chunk_ns[-1] == rec.last_token_ns
    assert rec.end_ns is not None and rec.end_ns >= rec.last_token_ns


@TRANSPORTS
async def test_stream_011_layout(serve, sse, transport):
    """0.11 chunks then the usage chunk: counts, usage, bytes, headers and times recorded."""
    parts = [
        sse.chunk_011(" a", prompt_ids=[1, 2, 3]),
        sse.chunk_011(" b"),
        sse.chunk_011(" c"),
        sse.chunk_011(" d", finish="length"),
        sse.usage_chunk(3, 4),
        sse.DONE,
    ]
    engine = await serve(sse_answer(parts))
    rec = await stream(engine, transport)
    assert rec.ok and rec.error is None and rec.http_status == 200
    assert rec.chunk_tokens == [1, 1, 1, 1]
    assert (rec.prompt_tokens, rec.completion_tokens) == (3, 4)
    assert rec.finish_reason == "length"
    assert rec.bytes_sent == len(BODY)
    assert rec.bytes_received == sum(len(p) for p in parts)
    assert rec.token_ids is None
    assert_times(rec)
    (request,) = engine.requests
    assert (request.method, request.path) == ("POST", "/v1/completions")
    assert request.headers["x-request-id"] == "req-1"
    assert request.headers["content-type"] == "application/json"
    assert "authorization" not in request.headers
    assert request.body == BODY


@TRANSPORTS
async def test_stream_033_layout_without_usage_chunk(serve, sse, transport):
    """0.33 chunks without a usage chunk: one token per chunk, completion_tokens their sum."""
    parts = [
        sse.chunk_033(" a"),
        sse.chunk_033(" b"),
        sse.chunk_033(" c", finish="length", fingerprint=True),
        sse.DONE,
    ]
    rec = await stream(await serve(sse_answer(parts)), transport)
    assert rec.ok
    assert rec.chunk_tokens == [1, 1, 1]
    assert (rec.prompt_tokens, rec.completion_tokens) == (None, 3)
    assert rec.finish_reason == "length"


@TRANSPORTS
async def test_stream_033_layout_with_usage_chunk(serve, sse, transport):
    """0.33 chunks and the separate usage chunk: usage taken from that chunk."""
    parts = [sse.chunk_033(" a"), sse.chunk_033(" b", finish="length"), sse.usage_chunk(7, 2)]
    rec = await stream(await serve(sse_answer([*parts, sse.DONE])), transport)
    assert rec.ok
    assert (rec.prompt_tokens, rec.completion_tokens) == (7, 2)
    assert rec.chunk_tokens == [1, 1]


@TRANSPORTS
async def test_token_ids_count_several_tokens_per_chunk(serve, sse, transport):
    """token_ids deltas count several tokens per chunk and are kept when asked."""
    parts = [
        sse.chunk_011("abc", prompt_ids=[1, 2, 3], token_ids=[5, 6, 7]),
        sse.chunk_011("d", token_ids=[8]),
        sse.chunk_011("ef", finish="length", token_ids=[9, 10]),
        sse.usage_chunk(3, 6),
        sse.DONE,
    ]
    rec = await stream(await serve(sse_answer(parts)), transport, keep=True)
    assert rec.ok
    assert rec.chunk_tokens == [3, 1, 2]
    assert rec.token_ids == [5, 6, 7, 8, 9, 10]
    assert rec.completion_tokens == 6


@TRANSPORTS
async def test_continuous_usage_stats_deltas(serve, sse, transport):
    """With continuous usage stats each chunk's count is the growth of completion_tokens."""
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
        sse.usage_chunk(3, 3),
        sse.DONE,
    ]
    rec = await stream(await serve(sse_answer(parts)), transport)
    assert rec.ok and rec.chunk_tokens == [1, 2]
    assert (rec.prompt_tokens, rec.completion_tokens) == (3, 3)


@TRANSPORTS
async def test_events_split_across_http_chunks(serve, sse, transport):
    """SSE lines split across HTTP chunks, CRLF line ends and comments parse the same way."""
    whole = (
        b": keep-alive\r\n\r\n"
        + sse.chunk_033(" a").replace(b"\n", b"\r\n")
        + sse.chunk_033(" b", finish="length")
        + sse.DONE
    )
    parts = [whole[:7], whole[7:30], whole[30:31], whole[31:-20], whole[-20:]]
    rec = await stream(await serve(sse_answer(parts)), transport)
    assert rec.ok
    assert rec.chunk_tokens == [1, 1]
    assert rec.bytes_received == len(whole)


@TRANSPORTS
async def test_mid_stream_error_event(serve, sse, transport):
    """A data: {"error": ...} event is EngineStreamError with its message and code."""
    err = json.dumps(
        {"error": {"message": "Internal server error", "type": "x", "param": None, "code": 500}}
    )
    parts = [sse.chunk_011(" a"), f"data: {err}\n\n".encode(), sse.DONE]
    rec = await stream(await serve(sse_answer(parts)), transport)
    assert not rec.ok
    assert isinstance(rec.error, EngineStreamError)
    assert (rec.error.message, rec.error.code) == ("Internal server error", 500)
    assert rec.chunk_tokens == [1] and rec.http_status == 200


@TRANSPORTS
async def test_stream_without_done_is_cut(serve, sse, transport):
    """A body that ends properly but without [DONE] is a StreamCutError keeping its chunks."""
    rec = await stream(
        await serve(sse_answer([sse.chunk_011(" a"), sse.chunk_011(" b")])), transport
    )
    assert isinstance(rec.error, StreamCutError)
    assert "before [DONE]" in str(rec.error)
    assert rec.chunk_tokens == [1, 1] and rec.ttft_s is not None and not rec.ok


@TRANSPORTS
async def test_connection_cut_mid_stream(serve, sse, transport):
    """The server closing the socket inside a chunked body is a StreamCutError."""
    answer = sse_answer([sse.chunk_011(" a"), sse.chunk_011(" b")], terminate=False)
    rec = await stream(await serve(answer), transport)
    assert isinstance(rec.error, StreamCutError)
    assert str(rec.error).startswith("connection broke after 2 content chunks")
    assert rec.chunk_tokens == [1, 1] and rec.end_ns is not None


@TRANSPORTS
async def test_bad_chunk_framing_is_cut(serve, sse, transport):
    """A chunk size line that is not hexadecimal ends the stream as a StreamCutError."""

    async def respond(request: Request, writer: asyncio.StreamWriter) -> None:
        writer.write(SSE_HEAD + chunk(sse.chunk_011(" a")) + b"zz\r\n")
        await writer.drain()

    rec = await stream(await serve(respond), transport)
    assert isinstance(rec.error, StreamCutError)
    assert rec.chunk_tokens == [1]


@TRANSPORTS
async def test_server_closing_without_answer_is_connect_error(serve, transport):
    """A connection closed before any answer byte is EngineConnectError."""

    async def respond(request: Request, writer: asyncio.StreamWriter) -> None:
        writer.close()

    rec = await stream(await serve(respond), transport)
    assert isinstance(rec.error, EngineConnectError)
    assert rec.http_status is None and rec.end_ns is not None


@TRANSPORTS
@pytest.mark.parametrize("framing", ["length", "chunked", "close"])
@pytest.mark.parametrize(("status", "payload", "message", "error_type"), HTTP_ERROR_CASES)
async def test_http_error_shapes(serve, transport, framing, status, payload, message, error_type):
    """Nested, flat and 401 bodies, however framed, give EngineHTTPError with the message."""
    rec = await stream(await serve(json_answer(status, payload, framing=framing)), transport)
    assert rec.http_status == status
    assert isinstance(rec.error, EngineHTTPError)
    assert (rec.error.status, rec.error.message, rec.error.error_type) == (
        status,
        message,
        error_type,
    )
    assert rec.chunk_ns == [] and rec.end_ns is not None and not rec.ok
    assert rec.bytes_received == len(json.dumps(payload))


@TRANSPORTS
async def test_bearer_key_sent_only_when_configured(serve, sse, transport):
    """Without a key the engine answers 401; with one the Authorization header carries it."""
    ok = sse_answer([sse.chunk_033(" a", finish="length"), sse.DONE])
    denied = json_answer(401, {"error": "Unauthorized"})

    async def respond(request: Request, writer: asyncio.StreamWriter) -> None:
        good = request.headers.get("authorization") == "Bearer sk-test-123"
        await (ok if good else denied)(request, writer)

    engine = await serve(respond)
    anonymous = await stream(engine, transport)
    keyed = await stream(engine, transport, api_key="sk-test-123")
    assert isinstance(anonymous.error, EngineHTTPError) and anonymous.error.status == 401
    assert keyed.ok
    assert "authorization" not in engine.requests[0].headers
    assert engine.requests[1].headers["authorization"] == "Bearer sk-test-123"
    assert "sk-test-123" not in repr(keyed) + str(anonymous.error)


@TRANSPORTS
async def test_request_deadline_is_recorded(serve, sse, transport):
    """A stream that stalls past the request deadline is EngineTimeoutError, chunks kept."""
    stalled = asyncio.Event()

    async def respond(request: Request, writer: asyncio.StreamWriter) -> None:
        writer.write(SSE_HEAD + chunk(sse.chunk_033(" a")))
        await writer.drain()
        await stalled.wait()

    engine = await serve(respond)
    async with EngineClient(engine.url, stream_transport=transport) as client:
        rec = await client.stream_completion(BODY, request_id="r", timeout_s=0.2)
    stalled.set()
    assert isinstance(rec.error, EngineTimeoutError)
    assert rec.chunk_tokens == [1] and rec.http_status == 200 and not rec.ok


@TRANSPORTS
async def test_deadline_while_waiting_for_a_connection(serve, sse, transport):
    """With one connection busy, a second request waiting for it times out at its deadline."""
    release = asyncio.Event()
    answering = asyncio.Event()

    async def respond(request: Request, writer: asyncio.StreamWriter) -> None:
        answering.set()
        writer.write(SSE_HEAD + chunk(sse.chunk_033(" a")))
        await writer.drain()
        await release.wait()
        writer.write(chunk(sse.chunk_033(" b", finish="length")) + chunk(sse.DONE) + b"0\r\n\r\n")
        await writer.drain()

    engine = await serve(respond)
    async with EngineClient(engine.url, stream_transport=transport, max_connections=1) as client:
        first = asyncio.create_task(client.stream_completion(BODY, request_id="a", timeout_s=20))
        await answering.wait()
        second = await client.stream_completion(BODY, request_id="b", timeout_s=0.2)
        release.set()
        done = await first
    assert isinstance(second.error, EngineTimeoutError) and second.http_status is None
    assert done.ok and done.chunk_tokens == [1, 1]
    assert [r.headers["x-request-id"] for r in engine.requests] == ["a"]


@TRANSPORTS
async def test_connection_refused_is_recorded(closed_port, transport):
    """A closed loopback port gives EngineConnectError in the record."""
    url = f"http://127.0.0.1:{closed_port}"
    async with EngineClient(url, timeout_s=5, stream_transport=transport) as client:
        rec = await client.stream_completion(BODY, request_id="r")
    assert isinstance(rec.error, EngineConnectError)
    assert rec.http_status is None and rec.chunk_ns == [] and not rec.ok and rec.end_ns


@TRANSPORTS
async def test_send_time_is_taken_just_before_the_request_is_written(serve, sse, transport):
    """The clock hands out 1, 2, 3, ...: 1 is provisional, 2 is taken as the request goes out."""
    engine = await serve(sse_answer([sse.chunk_033(" a", finish="length"), sse.DONE]))
    ticks = iter(range(1, 1000))
    rec = await stream(engine, transport, clock_ns=lambda: next(ticks))
    assert rec.ok and rec.send_ns == 2 and rec.first_token_ns is not None
    assert rec.first_token_ns > 2


@TRANSPORTS
async def test_send_deadline_past_before_the_call_sends_nothing(serve, sse, transport):
    """send_by_ns already behind the clock: no connection, no request, a SendDeadlineError."""
    engine = await serve(sse_answer([sse.chunk_033(" a", finish="length"), sse.DONE]))
    ticks = iter(range(100, 1000))
    async with EngineClient(
        engine.url, stream_transport=transport, clock_ns=lambda: next(ticks)
    ) as client:
        rec = await client.stream_completion(BODY, request_id="late", send_by_ns=99)
    assert isinstance(rec.error, SendDeadlineError) and "late" in str(rec.error)
    assert "0.000 ms past its send deadline" in str(rec.error)
    assert rec.send_ns == rec.end_ns == 100 and rec.bytes_sent == 0 and not rec.ok
    assert rec.http_status is None and rec.chunk_ns == []
    assert engine.connections == 0 and engine.requests == []


@TRANSPORTS
async def test_send_deadline_is_judged_on_the_send_stamp(serve, sse, transport):
    """Ticks 1, 2, ...: the provisional stamp (1) meets send_by_ns=1, the stamp as the head would
    go out (2) does not, so nothing reaches the engine; the client stays usable afterwards."""
    engine = await serve(sse_answer([sse.chunk_033(" a", finish="length"), sse.DONE]))
    ticks = iter(range(1, 1000))
    async with EngineClient(
        engine.url, stream_transport=transport, clock_ns=lambda: next(ticks)
    ) as client:
        late = await client.stream_completion(BODY, request_id="late", send_by_ns=1)
        assert engine.requests == []
        on_time = await client.stream_completion(BODY, request_id="next", send_by_ns=10**6)
    assert isinstance(late.error, SendDeadlineError) and late.send_ns == late.end_ns == 2
    assert late.bytes_sent == 0 and late.http_status is None
    assert on_time.ok and on_time.send_ns <= 10**6 and on_time.completion_tokens == 1
    assert [r.headers["x-request-id"] for r in engine.requests] == ["next"]


async def test_preconnect_opens_idle_connections_the_streams_then_use(serve, sse):
    """raw: preconnect(3) opens three connections; three concurrent streams reuse them, none
    connects again. Bounded by max_connections."""
    engine = await serve(sse_answer([sse.chunk_033(" a", finish="length"), sse.DONE]))
    async with EngineClient(engine.url, stream_transport="raw", max_connections=8) as client:
        assert await client.preconnect(3) == 3
        assert await client.preconnect(2) == 3  # already enough idle: nothing more opened
        records = await asyncio.gather(
            *(client.stream_completion(BODY, request_id=f"r{i}") for i in range(3))
        )
        assert all(r.ok for r in records)
        assert await client.preconnect(100) == 8  # capped at max_connections
        # the server's accept runs after the client's connect returns (later on uvloop's loop)
        for _ in range(1000):  # at most 10 s
            if engine.connections >= 8:
                break
            await asyncio.sleep(0.01)
    assert engine.connections == 8 and len(engine.requests) == 3


async def test_preconnect_is_a_no_op_on_httpx(serve, sse):
    """httpx keeps no pool of its own to fill: preconnect returns 0 and opens nothing."""
    engine = await serve(sse_answer([sse.chunk_033(" a", finish="length"), sse.DONE]))
    async with EngineClient(engine.url, stream_transport="httpx") as client:
        assert await client.preconnect(4) == 0
        with pytest.raises(ValueError, match="-1"):
            await client.preconnect(-1)
    assert engine.connections == 0


async def test_preconnect_to_a_closed_port_is_a_connect_error(closed_port):
    """A refused connect during preconnect raises EngineConnectError naming the origin, and gives
    its slot back: with one connection allowed, the next stream still tries to connect (a leaked
    slot would leave it waiting until its deadline, an EngineTimeoutError)."""
    url = f"http://127.0.0.1:{closed_port}"
    async with EngineClient(url, stream_transport="raw", max_connections=1, timeout_s=5) as client:
        with pytest.raises(EngineConnectError, match=f"127.0.0.1:{closed_port}"):
            await client.preconnect(2)
        rec = await client.stream_completion(BODY, request_id="after")
    assert isinstance(rec.error, EngineConnectError)


@TRANSPORTS
async def test_content_length_and_close_delimited_sse_bodies(serve, sse, transport):
    """An SSE body framed by Content-Length, or by closing the connection, parses the same."""
    data = sse.chunk_033(" a") + sse.chunk_033(" b", finish="length") + sse.DONE

    async def length(request: Request, writer: asyncio.StreamWriter) -> None:
        writer.write(f"HTTP/1.1 200 OK\r\ncontent-length: {len(data)}\r\n\r\n".encode() + data)
        await writer.drain()

    async def close(request: Request, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\n" + data)
        await writer.drain()
        writer.close()

    for respond in (length, close):
        rec = await stream(await serve(respond), transport)
        assert rec.ok and rec.chunk_tokens == [1, 1] and rec.bytes_received == len(data)


@TRANSPORTS
async def test_keep_alive_and_connection_close(serve, sse, transport):
    """Sequential streams share one connection; Connection: close answers open a new one each."""
    parts = [sse.chunk_033(" a", finish="length"), sse.usage_chunk(3, 1), sse.DONE]
    kept = await serve(sse_answer(parts))
    closing = await serve(
        sse_answer(parts, head=SSE_HEAD.replace(b"\r\n\r\n", b"\r\nconnection: close\r\n\r\n"))
    )
    for engine in (kept, closing):
        async with EngineClient(engine.url, stream_transport=transport) as client:
            records = [await client.stream_completion(BODY, request_id=f"r{i}") for i in range(4)]
        assert all(r.ok and r.completion_tokens == 1 for r in records)
        assert len(engine.requests) == 4
    assert closing.connections == 4
    if transport == "raw":
        assert kept.connections == 1
    else:  # httpx reuses a connection only when the chunked terminator came with [DONE]
        assert 1 <= kept.connections <= 4


@TRANSPORTS
async def test_64_concurrent_streams(serve, sse, transport):
    """64 streams are open at once on one client; each records every token."""
    streams, tokens = 64, 5
    all_open = asyncio.Event()
    parts = [
        sse.chunk_011("t", token_ids=[i], finish="length" if i == tokens - 1 else None)
        for i in range(tokens)
    ]
    answer = sse_answer([*parts, sse.usage_chunk(2, tokens), sse.DONE])

    async def respond(request: Request, writer: asyncio.StreamWriter) -> None:
        if len(engine.requests) >= streams:
            all_open.set()
        await all_open.wait()
        await answer(request, writer)

    engine = await serve(respond)
    body = completion_body(model="m", prompt=[1, 2], max_tokens=tokens)
    async with EngineClient(engine.url, timeout_s=20, stream_transport=transport) as client:
        records = await asyncio.gather(
            *(
                client.stream_completion(body, request_id=f"r{i}", keep_token_ids=True)
                for i in range(streams)
            )
        )
    assert [r.error for r in records] == [None] * streams
    assert {r.completion_tokens for r in records} == {tokens}
    assert {tuple(r.token_ids or []) for r in records} == {tuple(range(tokens))}
    assert engine.connections == streams
    assert sorted(r.headers["x-request-id"] for r in engine.requests) == sorted(
        f"r{i}" for i in range(streams)
    )


@TRANSPORTS
async def test_done_without_content_is_protocol_error(serve, sse, transport):
    """[DONE] after only a usage chunk is an EngineProtocolError, not a success."""
    rec = await stream(await serve(sse_answer([sse.usage_chunk(3, 0), sse.DONE])), transport)
    assert isinstance(rec.error, EngineProtocolError) and not rec.ok


@TRANSPORTS
async def test_cancelled_stream_frees_its_connection(serve, sse, transport):
    """Cancelling a stream mid-answer drops its connection; the next request gets a new one."""
    answering = asyncio.Event()
    stall = asyncio.Event()

    async def respond(request: Request, writer: asyncio.StreamWriter) -> None:
        if request.headers["x-request-id"] == "stalled":
            writer.write(SSE_HEAD + chunk(sse.chunk_033(" a")))
            await writer.drain()
            answering.set()
            await stall.wait()
            return
        await sse_answer([sse.chunk_033(" b", finish="length"), sse.DONE])(request, writer)

    engine = await serve(respond)
    async with EngineClient(engine.url, stream_transport=transport, max_connections=1) as client:
        task = asyncio.create_task(client.stream_completion(BODY, request_id="stalled"))
        await answering.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        rec = await client.stream_completion(BODY, request_id="next", timeout_s=10)
    stall.set()
    assert rec.ok and rec.chunk_tokens == [1]
    assert engine.connections == 2


@TRANSPORTS
@pytest.mark.parametrize(
    "payload",
    [b"data: {not json\n\n", b'data: ["a"]\n\n', b'data: {"choices": [{"token_ids": 3}]}\n\n'],
)
async def test_bad_events_are_protocol_errors(serve, sse, transport, payload):
    """Unparseable and ill-typed events are recorded as EngineProtocolError, never raised."""
    rec = await stream(await serve(sse_answer([payload, sse.DONE])), transport)
    assert isinstance(rec.error, EngineProtocolError) and not rec.ok
