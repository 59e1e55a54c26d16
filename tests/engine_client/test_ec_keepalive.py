"""Servers close idle keep-alive connections (vLLM after 5 s): no request is lost to that race.

The server is narwhal-sim's own HTTP/1.1 server, whose ``drop_idle_after_s`` makes the client lose
the race every time: a request arriving on a connection idle longer than that is dropped
unanswered and the connection closed, as when the server's idle close and the request cross.
Both stream transports must resend such a request once, on a new connection, with the send
deadline still applying, and must never reuse a connection that is past its keep-alive expiry
or whose close has already arrived.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import pytest

from narwhal_engine_client import (
    EngineClient,
    EngineConnectError,
    EngineHTTPError,
    SendDeadlineError,
    StreamCutError,
    StreamTransport,
)
from narwhal_sim._http import HttpServer, Request, Responder

from .conftest import DONE, chunk_033, usage_chunk

TRANSPORTS: tuple[StreamTransport, ...] = ("httpx", "raw")
ANSWER = chunk_033(" a", finish="length") + usage_chunk(3, 1) + DONE


class Answers:
    """The server's handler: an SSE answer per request, or what ``script`` says for the n-th."""

    def __init__(self, script: dict[int, str] | None = None) -> None:
        self.script = script or {}
        self.handled = 0

    async def __call__(self, request: Request, resp: Responder) -> None:
        self.handled += 1
        what = self.script.get(self.handled, "sse")
        if what == "503":
            resp.send(503, b'{"error":{"message":"busy","type":"x","param":null,"code":503}}')
        elif what == "cut":
            resp.start_stream()
            resp.write_chunk(chunk_033(" a"))
            await asyncio.sleep(0.01)
            resp.abort()
        else:
            resp.start_stream()
            resp.end_stream(ANSWER)


@asynccontextmanager
async def serving(
    answers: Answers, *, keep_alive_s: float = 5.0, drop_idle_after_s: float | None = None
) -> AsyncIterator[tuple[HttpServer, str]]:
    server = HttpServer(answers, keep_alive_s=keep_alive_s)
    server.drop_idle_after_s = drop_idle_after_s
    await server.start("127.0.0.1", 0)
    assert server._server is not None
    port = server._server.sockets[0].getsockname()[1]
    try:
        yield server, f"http://127.0.0.1:{port}"
    finally:
        await server.stop()


@contextmanager
def serving_in_thread(answers: Answers, *, keep_alive_s: float) -> Iterator[tuple[HttpServer, str]]:
    """The server on its own event loop in a thread: it closes connections while the client's
    loop is blocked, so the close reaches the client's socket before its loop has seen it."""
    loop = asyncio.new_event_loop()
    server = HttpServer(answers, keep_alive_s=keep_alive_s)
    ready = threading.Event()

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(server.start("127.0.0.1", 0))
        ready.set()
        loop.run_forever()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert ready.wait(10)
    assert server._server is not None
    port = server._server.sockets[0].getsockname()[1]
    try:
        yield server, f"http://127.0.0.1:{port}"
    finally:
        asyncio.run_coroutine_threadsafe(server.stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def _client(url: str, transport: StreamTransport, **kw: Any) -> EngineClient:
    return EngineClient(url, stream_transport=transport, timeout_s=10, **kw)


async def _leave_idle(client: EngineClient) -> None:
    """One complete answer that leaves its connection idle in the pool the next stream takes
    from: a stream on the raw transport; on httpx a plain call (an httpx stream stops reading at
    ``[DONE]``, so its connection is closed rather than pooled)."""
    if client.stream_transport == "raw":
        assert (await client.stream_completion(b"{}", request_id="warm")).ok
    else:
        assert await client.health() == 200


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_request_the_idle_close_crossed_is_resent_once_on_a_new_connection(
    transport: StreamTransport,
) -> None:
    answers = Answers()
    async with (
        serving(answers, drop_idle_after_s=0.3) as (server, url),
        _client(url, transport) as client,
    ):
        await _leave_idle(client)
        await asyncio.sleep(0.6)  # the connection is now idle past the server's bound
        sent: list[int] = []
        before = time.perf_counter_ns()
        second = await client.stream_completion(
            b"{}", request_id="r2", on_sent=lambda: sent.append(1)
        )
    assert second.error is None and second.ok, second.error
    assert second.resends == 1
    assert server.idle_drops == 1  # the first send of r2 was dropped unanswered...
    assert answers.handled == 2  # ...and its resend answered
    assert server.accepted == 2  # on a second connection
    assert sent == [1]  # counted once on the wire
    assert second.send_ns > before and second.chunk_tokens == [1]
    assert second.completion_tokens == 1 and second.prompt_tokens == 3


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_the_send_deadline_applies_to_the_resend(transport: StreamTransport) -> None:
    offset = [0]

    def clock() -> int:
        return time.perf_counter_ns() + offset[0]

    def jump() -> None:  # called once, just before the first send is written
        offset[0] = 10**10

    async with (
        serving(Answers(), drop_idle_after_s=0.3) as (server, url),
        _client(url, transport, clock_ns=clock) as client,
    ):
        await _leave_idle(client)
        await asyncio.sleep(0.6)
        record = await client.stream_completion(
            b"{}", request_id="r2", send_by_ns=clock() + 10**9, on_sent=jump
        )
    assert isinstance(record.error, SendDeadlineError)
    assert "not resent" in str(record.error)
    assert record.resends == 1 and record.bytes_sent > 0 and not record.chunk_ns
    assert server.idle_drops == 1


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_fresh_connection_closed_unanswered_is_not_resent(
    transport: StreamTransport,
) -> None:
    async with (
        serving(Answers(), drop_idle_after_s=0.0) as (server, url),
        _client(url, transport) as client,
    ):
        record = await client.stream_completion(b"{}", request_id="r1")
    assert isinstance(record.error, EngineConnectError)
    assert record.resends == 0 and server.idle_drops == 1


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("what", ["503", "cut"])
async def test_nothing_else_is_retried(transport: StreamTransport, what: str) -> None:
    answers = Answers({2: what})
    async with (
        serving(answers) as (_, url),
        _client(url, transport) as client,
    ):
        await _leave_idle(client)
        record = await client.stream_completion(b"{}", request_id="r2")
    expected = EngineHTTPError if what == "503" else StreamCutError
    assert isinstance(record.error, expected), record.error
    assert record.resends == 0 and answers.handled == 2


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_connection_idle_past_the_expiry_is_not_reused(transport: StreamTransport) -> None:
    async with (
        serving(Answers()) as (server, url),
        _client(url, transport, keepalive_expiry_s=0.5) as client,
    ):
        await _leave_idle(client)
        await asyncio.sleep(0.8)
        record = await client.stream_completion(b"{}", request_id="r2")
        assert record.ok and record.resends == 0
        assert server.accepted == 2
        await _leave_idle(client)
        assert (await client.stream_completion(b"{}", request_id="r3")).ok
    assert server.accepted == 3 if transport == "httpx" else 2  # one used at once is reused


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_connection_whose_close_already_arrived_is_not_reused(
    transport: StreamTransport,
) -> None:
    with serving_in_thread(Answers(), keep_alive_s=0.5) as (server, url):
        async with _client(url, transport) as client:
            await _leave_idle(client)
            await asyncio.sleep(0)
            deadline = time.monotonic() + 10
            while server.idle_closes == 0 and time.monotonic() < deadline:
                time.sleep(0.01)  # noqa: ASYNC251 - blocks this loop on purpose: the close arrives unseen
            assert server.idle_closes == 1
            time.sleep(0.05)  # noqa: ASYNC251 - still blocked: the FIN sits unread in the socket
            record = await client.stream_completion(b"{}", request_id="r2")
    assert record.ok, record.error
    assert record.resends == 0  # never written on the closed connection
    assert server.accepted == 2


def test_keepalive_expiry_must_be_positive() -> None:
    with pytest.raises(ValueError, match="keepalive_expiry_s"):
        EngineClient("http://127.0.0.1:1", keepalive_expiry_s=0)


def test_the_default_expiry_is_below_vllms_keep_alive() -> None:
    from narwhal_engine_client import DEFAULT_KEEPALIVE_EXPIRY_S

    assert 0 < DEFAULT_KEEPALIVE_EXPIRY_S < 5.0
    assert EngineClient("http://127.0.0.1:1").keepalive_expiry_s == DEFAULT_KEEPALIVE_EXPIRY_S


async def test_a_plain_call_the_idle_close_crossed_is_sent_once_more() -> None:
    answers = Answers()
    async with (
        serving(answers, drop_idle_after_s=0.3) as (server, url),
        _client(url, "httpx") as client,
    ):
        assert await client.health() == 200
        await asyncio.sleep(0.6)
        assert await client.health() == 200
    assert server.idle_drops == 1 and answers.handled == 2 and server.accepted == 2


async def test_preconnect_replaces_idle_connections_past_the_expiry() -> None:
    async with (
        serving(Answers()) as (server, url),
        _client(url, "raw", keepalive_expiry_s=0.5) as client,
    ):
        assert await client.preconnect(2) == 2
        assert await client.preconnect(2) == 2  # still fresh: kept
        assert server.accepted == 2
        await asyncio.sleep(0.8)
        assert await client.preconnect(2) == 2  # expired: replaced ahead of the sends
        assert server.accepted == 4
