"""A small asyncio HTTP/1.1 server: keep-alive, Content-Length bodies, JSON and chunked SSE replies.

One ``asyncio.Protocol`` per connection parses requests and hands each to an async handler with a
``Responder``. Streaming replies write straight to the transport (``Responder.write_chunk`` is
synchronous), so emitting a token costs one ``transport.write`` and no task switch.

Like vLLM's API server (uvicorn's ``timeout_keep_alive``, 5 s by default), a connection idle for
``keep_alive_s`` is closed. ``drop_idle_after_s`` (a fault) makes a client always lose the race a
real server only sometimes wins: a request that arrives on a connection idle for longer than that
is dropped unanswered and the connection closed, as when the close and the request cross.
Idle times are the event loop's, so a virtual-time loop drives them too.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import cast

KEEP_ALIVE_S = 5.0
"""vLLM's default ``VLLM_HTTP_TIMEOUT_KEEP_ALIVE``: an idle connection is closed after this."""
_MAX_HEAD = 64 * 1024
_MAX_BODY = 64 * 1024 * 1024
_JSON = b"application/json"


@dataclass(slots=True)
class Request:
    """One parsed HTTP request (header names lower-cased)."""

    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes
    peer: str
    received: float  # loop time when the request's first bytes arrived


Handler = Callable[[Request, "Responder"], Awaitable[None]]


def _reason(status: int) -> bytes:
    try:
        return HTTPStatus(status).phrase.encode("ascii")
    except ValueError:
        return b"Unknown"


class Responder:
    """Writes one response (plain or chunked stream) on a connection."""

    __slots__ = ("_close_callbacks", "_conn", "_keep_alive", "_streaming", "done")

    def __init__(self, conn: _Connection, keep_alive: bool) -> None:
        self._conn = conn
        self._keep_alive = keep_alive
        self._streaming = False
        self._close_callbacks: list[Callable[[], None]] = []
        self.done = False

    @property
    def closed(self) -> bool:
        """True once the peer went away or the connection was aborted."""
        return self._conn.closed

    def on_close(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` if the connection is lost before the response is done."""
        self._close_callbacks.append(callback)

    def _head(
        self, status: int, content_type: bytes, extra: list[tuple[str, str]], length: int | None
    ) -> bytes:
        lines = [b"HTTP/1.1 %d %s" % (status, _reason(status)), b"content-type: " + content_type]
        lines += [f"{k}: {v}".encode("latin-1") for k, v in extra]
        lines.append(
            b"content-length: %d" % length if length is not None else b"transfer-encoding: chunked"
        )
        if not self._keep_alive:
            lines.append(b"connection: close")
        return b"\r\n".join(lines) + b"\r\n\r\n"

    def send(
        self,
        status: int,
        body: bytes = b"",
        *,
        content_type: bytes = _JSON,
        headers: list[tuple[str, str]] | None = None,
    ) -> None:
        """Write a complete response with a Content-Length body."""
        if self.done or self._conn.closed:
            return
        self._conn.write(self._head(status, content_type, headers or [], len(body)) + body)
        self._finish()

    def start_stream(
        self,
        status: int = 200,
        *,
        content_type: bytes = b"text/event-stream; charset=utf-8",
        headers: list[tuple[str, str]] | None = None,
    ) -> None:
        """Write the head of a chunked response."""
        self._streaming = True
        self._conn.write(self._head(status, content_type, headers or [], None))

    def write_chunk(self, data: bytes) -> None:
        """Write one chunk of a streamed body (no-op once closed)."""
        if data and not self._conn.closed:
            self._conn.write(b"%x\r\n%b\r\n" % (len(data), data))

    def end_stream(self, last: bytes = b"") -> None:
        """Write ``last`` (if any) and the terminating chunk."""
        if self.done or self._conn.closed:
            return
        tail = b"%x\r\n%b\r\n" % (len(last), last) if last else b""
        self._conn.write(tail + b"0\r\n\r\n")
        self._finish()

    def abort(self) -> None:
        """Drop the connection without finishing the body (a cut stream)."""
        self.done = True
        self._conn.abort()

    def _finish(self) -> None:
        self.done = True
        if not self._keep_alive:
            self._conn.close()

    def _lost(self) -> None:
        if not self.done:
            self.done = True
            for cb in self._close_callbacks:
                cb()


class _Connection(asyncio.Protocol):
    def __init__(self, handler: Handler, server: HttpServer) -> None:
        self._handler = handler
        self._server = server
        self._buf = bytearray()
        self._transport: asyncio.Transport | None = None
        self._busy = False
        self._responder: Responder | None = None
        self._peer = ""
        self._first_byte = 0.0
        self._continued = False
        self._idle_since = 0.0
        self._idle_timer: asyncio.TimerHandle | None = None
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # Duck-typed, as asyncio's own streams take it: uvloop's TCP transport has every method of
        # asyncio.Transport without being a subclass of it.
        self._transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        self._peer = str(peer[0]) if peer else ""
        self._server.connections.add(self)
        self._server.accepted += 1
        self._idle()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._cancel_idle()
        self._server.connections.discard(self)
        if self._responder is not None:
            self._responder._lost()

    def data_received(self, data: bytes) -> None:
        if not self._buf:
            now = asyncio.get_running_loop().time()
            if not self._busy:
                self._cancel_idle()
                bound = self._server.drop_idle_after_s
                # 0 drops every request that finds the connection idle: uvloop's clock counts
                # whole milliseconds, so a request right after the connect reads as idle for 0 s
                if bound is not None and (bound == 0 or now - self._idle_since > bound):
                    self._server.idle_drops += 1
                    self.close()  # the idle close crossed this request: never answered
                    return
            self._first_byte = now
        self._buf += data
        if not self._busy:
            self._next()

    def _idle(self) -> None:
        """Nothing in progress: close the connection if it stays idle for ``keep_alive_s``."""
        loop = asyncio.get_running_loop()
        self._idle_since = loop.time()
        self._cancel_idle()
        if not self.closed:
            self._idle_timer = loop.call_later(self._server.keep_alive_s, self._idle_close)

    def _idle_close(self) -> None:
        if not self._busy and not self._buf and not self.closed:
            self._server.idle_closes += 1
            self.close()

    def _cancel_idle(self) -> None:
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None

    def write(self, data: bytes) -> None:
        if self._transport is not None and not self.closed:
            self._transport.write(data)

    def close(self) -> None:
        if self._transport is not None and not self.closed:
            self._transport.close()

    def abort(self) -> None:
        if self._transport is not None and not self.closed:
            self.closed = True
            self._transport.abort()

    def _error(self, status: int, message: str) -> None:
        body = b'{"error":{"message":"%s","type":"BadRequestError","param":null,"code":%d}}' % (
            message.encode(),
            status,
        )
        self.write(
            b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n"
            b"connection: close\r\n\r\n%b" % (status, _reason(status), len(body), body)
        )
        self.close()

    def _next(self) -> None:
        end = self._buf.find(b"\r\n\r\n")
        if end < 0:
            if len(self._buf) > _MAX_HEAD:
                self._error(431, "request header too large")
            return
        try:
            head = bytes(self._buf[:end]).decode("latin-1")
            request_line, *header_lines = head.split("\r\n")
            method, target, version = request_line.split(" ")
            headers = {}
            for line in header_lines:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            length = int(headers.get("content-length", "0"))
        except ValueError:
            self._error(400, "malformed request")
            return
        if "chunked" in headers.get("transfer-encoding", "").lower():
            self._error(411, "chunked request bodies are not supported")
            return
        if length < 0 or length > _MAX_BODY:
            self._error(413, "request body too large")
            return
        if len(self._buf) < end + 4 + length:
            if headers.get("expect", "").lower() == "100-continue" and not self._continued:
                self._continued = True
                self.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            return
        self._continued = False
        body = bytes(self._buf[end + 4 : end + 4 + length])
        del self._buf[: end + 4 + length]
        conn_hdr = headers.get("connection", "").lower()
        keep_alive = conn_hdr != "close" if version == "HTTP/1.1" else conn_hdr == "keep-alive"
        path, _, query = target.partition("?")
        request = Request(method.upper(), path, query, headers, body, self._peer, self._first_byte)
        self._first_byte = asyncio.get_running_loop().time()
        responder = Responder(self, keep_alive and not self._server.closing)
        self._responder = responder
        self._busy = True
        task = asyncio.ensure_future(self._run(request, responder))
        self._server.tasks.add(task)
        task.add_done_callback(self._server.tasks.discard)

    async def _run(self, request: Request, responder: Responder) -> None:
        try:
            await self._handler(request, responder)
        except Exception:
            if not responder.done and not responder._streaming:
                responder.send(
                    500,
                    b'{"error":{"message":"internal simulator error",'
                    b'"type":"InternalServerError","param":null,"code":500}}',
                )
            else:
                responder.abort()
        if not responder.done:
            responder.abort()
        self._busy = False
        self._responder = None
        if not self.closed and self._buf:
            self._next()
        elif not self.closed:
            self._idle()


class HttpServer:
    """One listening socket served by ``handler``."""

    def __init__(self, handler: Handler, *, keep_alive_s: float = KEEP_ALIVE_S) -> None:
        self._handler = handler
        self.keep_alive_s = keep_alive_s
        self.drop_idle_after_s: float | None = None
        self.accepted = 0  # connections accepted
        self.idle_closes = 0  # connections closed for staying idle keep_alive_s
        self.idle_drops = 0  # requests dropped unanswered by drop_idle_after_s
        self._server: asyncio.Server | None = None
        self.connections: set[_Connection] = set()
        self.tasks: set[asyncio.Future[None]] = set()
        self.closing = False

    async def start(self, host: str, port: int) -> None:
        """Bind and listen."""
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: _Connection(self._handler, self), host, port, reuse_address=True, backlog=1024
        )

    def abort_all(self) -> None:
        """Drop every open connection (a restart cuts in-flight requests)."""
        for conn in list(self.connections):
            conn.abort()

    async def stop(self) -> None:
        """Stop listening, drop connections and wait for handlers."""
        self.closing = True
        if self._server is not None:
            self._server.close()
        self.abort_all()
        for task in list(self.tasks):
            task.cancel()
        if self.tasks:
            await asyncio.gather(*self.tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
