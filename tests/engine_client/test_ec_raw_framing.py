"""The raw stream transport's HTTP/1.1 parsing, fed read by read, and its connection pool."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from narwhal_engine_client import (
    EngineClient,
    EngineConnectError,
    StreamCutError,
    StreamRecord,
    completion_body,
)
from narwhal_engine_client._sse import Consumer
from narwhal_engine_client._transports.http1 import Connection

BODY = completion_body(model="m", prompt=[1], max_tokens=2)


class FakePool:
    """What a Connection needs from its pool; remembers releases and losses."""

    origin = "http://engine.test"

    def __init__(self) -> None:
        self.released: list[Connection] = []
        self.lost_conns: list[Connection] = []

    def release(self, conn: Connection) -> None:
        self.released.append(conn)

    def lost(self, conn: Connection) -> None:
        self.lost_conns.append(conn)


class FakeTransport(asyncio.Transport):
    """Collects writes; abort() closes the connection like a socket would."""

    def __init__(self, conn: Connection) -> None:
        super().__init__()
        self.conn = conn
        self.written = b""
        self.aborted = False

    def write(self, data: Any) -> None:
        self.written += bytes(data)

    def abort(self) -> None:
        if not self.aborted:
            self.aborted = True
            self.conn.connection_lost(None)

    def is_closing(self) -> bool:
        return self.aborted


def chunk(data: bytes) -> bytes:
    """One HTTP/1.1 chunk."""
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def sse_event(text: str, finish: str | None = None) -> bytes:
    """A content event of one token (its id in ``token_ids``)."""
    reason = f'"{finish}"' if finish else "null"
    choice = f'{{"text":"{text}","finish_reason":{reason},"token_ids":[7]}}'
    return f'data: {{"choices":[{choice}]}}\n\n'.encode()


EVENTS = [sse_event("a"), sse_event("b", "length"), b"data: [DONE]\n\n"]
CHUNKED_ANSWER = (
    b"HTTP/1.1 100 Continue\r\n\r\n"
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/event-stream\r\n\r\n"
    + chunk(EVENTS[0])
    + chunk(EVENTS[1][:9])
    + chunk(EVENTS[1][9:] + EVENTS[2])
    + b"0\r\nx-trailer: 1\r\n\r\n"
)


def start(clock: Any = None) -> tuple[Connection, FakePool, FakeTransport, StreamRecord, Any]:
    """A Connection with a request written; returns it, its pool, transport, record, future."""
    pool = FakePool()
    ticks = iter(range(1, 100_000))
    conn = Connection(pool, clock or (lambda: next(ticks)))
    transport = FakeTransport(conn)
    conn.connection_made(transport)
    record = StreamRecord(request_id="r", send_ns=0)
    future = conn.start(record, Consumer(record, False), b"REQUEST")
    return conn, pool, transport, record, future


@pytest.mark.parametrize("size", [1, 2, 3, 5, 8, 13, 64, len(CHUNKED_ANSWER)])
async def test_chunked_answer_split_at_every_size(size):
    """Head, 1xx, chunk sizes, CRLFs and trailers parse whatever the read boundaries."""
    conn, pool, transport, record, future = start()
    for at in range(0, len(CHUNKED_ANSWER), size):
        conn.data_received(CHUNKED_ANSWER[at : at + size])
    assert future.done()
    assert record.ok and record.http_status == 200
    assert record.chunk_tokens == [1, 1] and record.completion_tokens == 2
    assert record.finish_reason == "length"
    # counted up to the read that completed "data: [DONE]\n" (httpx counts the same way)
    assert sum(len(e) for e in EVENTS) - record.bytes_received in (0, 1)
    assert record.send_ns == 1 and transport.written == b"REQUEST"
    assert pool.released == [conn] and not transport.aborted


async def test_one_clock_reading_per_read():
    """Events arriving in one read share its single time stamp."""
    conn, _, _, record, _ = start()
    head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    conn.data_received(head + chunk(EVENTS[0]) + chunk(EVENTS[1]))
    conn.data_received(chunk(EVENTS[2]) + b"0\r\n\r\n")
    assert record.chunk_ns == [2, 2]
    assert record.end_ns == 3 and record.ok


async def test_done_settles_before_the_terminator_and_connection_drains():
    """[DONE] settles the record at once; the terminator read later returns the connection."""
    conn, pool, transport, record, future = start()
    conn.data_received(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
    conn.data_received(b"".join(chunk(e) for e in EVENTS))
    assert future.done() and record.ok and pool.released == []
    assert conn.drain is not None
    conn.data_received(b"0\r\n\r\n")
    assert pool.released == [conn] and conn.drain is None and not transport.aborted


async def test_bytes_beyond_the_body_prevent_reuse():
    """A Content-Length body followed by stray bytes settles, but the connection is closed."""
    conn, pool, transport, record, _ = start()
    data = b"".join(EVENTS)
    conn.data_received(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(data) + data + b"X")
    assert record.ok and record.bytes_received == len(data)
    assert pool.released == [] and transport.aborted


async def test_bytes_while_idle_close_the_connection():
    """An answer nobody asked for closes the connection instead of confusing the next request."""
    conn, pool, transport, _, _ = start()
    data = b"".join(EVENTS)
    conn.data_received(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(data) + data)
    assert pool.released == [conn]
    conn.data_received(b"HTTP/1.1 200 OK\r\n")
    assert transport.aborted and pool.lost_conns == [conn]


@pytest.mark.parametrize(
    ("answer", "what"),
    [
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", "transfer-encoding"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: x1\r\n\r\n", "content-length"),
        (b"SPDY/3 200 OK\r\n\r\n", "status line"),
    ],
)
async def test_unusable_heads_are_connect_errors(answer, what):
    """A head the client cannot frame is recorded (EngineConnectError, as httpx records it)."""
    conn, _, transport, record, future = start()
    conn.data_received(answer)
    assert future.done() and transport.aborted
    assert isinstance(record.error, EngineConnectError)
    assert what in str(record.error)


async def test_eof_inside_a_chunk_is_cut():
    """The connection closing inside a chunk is a StreamCutError keeping the chunks so far."""
    conn, _, _, record, future = start()
    conn.data_received(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk(EVENTS[0]))
    conn.data_received(b"ff\r\ndata: ")
    conn.connection_lost(None)
    assert future.done()
    assert isinstance(record.error, StreamCutError) and record.chunk_tokens == [1]


async def test_pool_never_opens_more_than_max_connections(sse):
    """Six concurrent streams on a pool of two: never more than two connections, all succeed."""
    live = 0
    peak = 0

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal live, peak
        live += 1
        peak = max(peak, live)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
                await reader.readexactly(length)
                await asyncio.sleep(0.01)
                events = [sse.chunk_033(" a", finish="length"), sse.DONE]
                writer.write(
                    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                    + b"".join(chunk(e) for e in events)
                    + b"0\r\n\r\n"
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            live -= 1
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    try:
        async with EngineClient(url, stream_transport="raw", max_connections=2) as client:
            records = await asyncio.gather(
                *(client.stream_completion(BODY, request_id=f"r{i}") for i in range(6))
            )
    finally:
        server.close()
        await server.wait_closed()
    assert all(r.ok for r in records)
    assert peak == 2


def test_raw_transport_needs_http_and_a_known_name():
    """https base URLs and unknown transport names are refused when the client is built."""
    with pytest.raises(ValueError, match="http://"):
        EngineClient("https://engine.test", stream_transport="raw")
    with pytest.raises(ValueError, match="stream_transport"):
        EngineClient("http://engine.test", stream_transport="curl")


async def test_request_id_with_line_breaks_is_refused():
    """A request id that would break the request head raises ValueError before anything is sent."""
    async with EngineClient("http://127.0.0.1:9", stream_transport="raw") as client:
        with pytest.raises(ValueError, match="request_id"):
            await client.stream_completion(BODY, request_id="a\r\nX-Evil: 1")
