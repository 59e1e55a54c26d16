"""The raw stream transport: streaming ``POST /v1/completions`` on a minimal HTTP/1.1 client.

Opt-in (``EngineClient(..., stream_transport="raw")``); every other call stays on httpx. It exists
for CPU per request: httpx's read path (httpcore, h11, anyio) costs about 0.1 ms per SSE chunk,
this one a small fraction of that (README "Stream transports"). The records are those of the httpx
path: the same SSE consumer, the same error types for the same failures.

The pool keeps at most ``max_connections`` keep-alive connections to the engine, reuses the most
recently released one first, and queues callers beyond the bound. Plain ``http://`` only.

Servers close idle connections (vLLM after 5 s): an idle connection older than
``keepalive_expiry_s``, or one on which the server's close has already arrived (its socket is
readable while nothing was asked), is dropped instead of reused. A request written on a reused
connection that closes before a single response byte was never answered: it is sent once more on
a new connection, within the same deadline and send-by time (``StreamRecord.resends``).
"""

from __future__ import annotations

import asyncio
import select
import time
from collections import deque
from collections.abc import Callable
from urllib.parse import urlsplit

from narwhal_engine_client._errors import EngineConnectError, EngineTimeoutError, describe
from narwhal_engine_client._record import StreamRecord, restart, timed_out, too_late
from narwhal_engine_client._sse import Consumer
from narwhal_engine_client._transports.http1 import Connection

_FORBIDDEN_IN_HEADER = (b"\r", b"\n", b"\0")


class _ConnectTimeout(Exception):
    """Connecting took longer than ``connect_timeout_s``."""


class RawStreamPool:
    """Keep-alive HTTP/1.1 connections to one engine, for streaming completions only."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None,
        max_connections: int,
        connect_timeout_s: float,
        clock_ns: Callable[[], int],
        keepalive_expiry_s: float,
        idle_clock_ns: Callable[[], int] = time.monotonic_ns,
    ) -> None:
        parts = urlsplit(base_url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(
                f"stream_transport='raw' needs an http:// base URL, got {parts.scheme}://"
            )
        self._host = parts.hostname
        self._port = parts.port or 80
        self.origin = f"http://{parts.netloc.rpartition('@')[2]}"
        path = parts.path.rstrip("/") + "/v1/completions"
        head = (
            f"POST {path} HTTP/1.1\r\nHost: {parts.netloc.rpartition('@')[2]}\r\n"
            "Accept: */*\r\nConnection: keep-alive\r\nUser-Agent: narwhal-engine-client\r\n"
            "Content-Type: application/json\r\n"
        )
        if api_key:
            head += f"Authorization: Bearer {api_key}\r\n"
        self._head = head.encode("latin-1")  # holds the key: never logged, never in a record
        self._max = max_connections
        self._connect_timeout_s = connect_timeout_s
        self._expiry_ns = int(keepalive_expiry_s * 1e9)
        self._idle_clock = idle_clock_ns  # connection ages only; never a measured time
        self._clock = clock_ns
        self._open = 0
        self._idle: list[Connection] = []
        self._all: set[Connection] = set()
        self._waiters: deque[asyncio.Future[Connection | None]] = deque()
        self._closed = False

    def __repr__(self) -> str:
        return f"RawStreamPool({self.origin!r})"

    async def stream(
        self,
        content: bytes,
        *,
        request_id: str,
        deadline_s: float,
        keep_token_ids: bool,
        send_by_ns: int | None = None,
        on_sent: Callable[[], None] | None = None,
    ) -> StreamRecord:
        """One streaming completion; request-level failures land in ``StreamRecord.error``."""
        if self._closed:
            raise RuntimeError("the engine client has been closed")
        rid = request_id.encode("ascii")
        if any(c in rid for c in _FORBIDDEN_IN_HEADER):
            raise ValueError("request_id must not contain CR, LF or NUL")
        data = b"".join(
            (
                self._head,
                b"X-Request-Id: ",
                rid,
                b"\r\nContent-Length: ",
                str(len(content)).encode(),
                b"\r\n\r\n",
                content,
            )
        )
        clock = self._clock
        record = StreamRecord(request_id=request_id, send_ns=0, bytes_sent=len(content))
        consumer = Consumer(record, keep_token_ids)
        conn: Connection | None = None
        settled = False
        record.send_ns = clock()  # replaced just before the request is written
        if too_late(record, record.send_ns, send_by_ns):
            return record
        try:
            async with asyncio.timeout(deadline_s):
                conn, pooled = await self._acquire()
                await conn.start(record, consumer, data, send_by_ns, on_sent)
                if pooled and conn.unanswered:
                    restart(record)  # the server closed it as idle: never answered
                    consumer = Consumer(record, keep_token_ids)
                    conn = None
                    conn, _ = await self._acquire(fresh=True)
                    await conn.start(record, consumer, data, send_by_ns, None)
                settled = True
        except TimeoutError:
            if conn is None or conn.detach(record):
                timed_out(record, clock(), "deadline", deadline_s)
        except _ConnectTimeout:
            what = f"ConnectTimeout: no connection within {self._connect_timeout_s:g} s"
            timed_out(record, clock(), what, deadline_s)
        except OSError as exc:
            record.end_ns = clock()
            record.error = EngineConnectError(f"cannot reach {self.origin}: {describe(exc)}")
        finally:
            if not settled and conn is not None:
                conn.detach(record)  # cancelled while the answer was open: drop the socket
        return record

    async def _acquire(self, *, fresh: bool = False) -> tuple[Connection, bool]:
        """A connection and whether it came from the idle pool; ``fresh``: a new one (when every
        slot is taken, the oldest idle connection gives up its slot, or a slot is waited for)."""
        idle = self._idle
        while True:
            if not fresh:
                while idle:
                    conn = idle.pop()
                    if self._reusable(conn):
                        return conn, True
                    conn.abort()  # its slot frees when connection_lost runs
            elif idle and self._open >= self._max:
                idle.pop(0).abort()  # its slot frees (and wakes a waiter) once it is lost
            if self._open < self._max:
                self._open += 1
                try:
                    return await self._connect(), False
                except BaseException:
                    self._open -= 1  # the connection never took the slot
                    self._wake()
                    raise
            waiter: asyncio.Future[Connection | None] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                got = await waiter
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():
                    handed = waiter.result()  # handed over just as we gave up: pass it on
                    if handed is None:
                        self._wake()
                    else:
                        self.release(handed, used=False)
                else:
                    self._waiters.remove(waiter)
                raise
            if self._closed:
                raise RuntimeError("the engine client has been closed")
            if got is None:
                continue  # a slot was freed
            if fresh:
                self.release(got, used=False)  # a kept-alive one is not what is wanted: pool it
            elif self._reusable(got):
                return got, True
            else:
                got.abort()  # (one that closed on its way here already freed its slot)

    def _reusable(self, conn: Connection) -> bool:
        """Open, idle for less than the keep-alive expiry, and nothing received while idle (a
        readable idle socket holds the server's close, a reset, or bytes nobody asked for)."""
        if not conn.usable or self._idle_clock() - conn.idle_since_ns > self._expiry_ns:
            return False
        transport = conn.transport
        sock = transport.get_extra_info("socket") if transport is not None else None
        if sock is None:
            return True
        try:
            readable, _, _ = select.select([sock.fileno()], [], [], 0)
        except (OSError, ValueError):
            return False
        return not readable

    def drop_idle(self) -> int:
        """Close every idle connection (their slots free as they close); returns how many."""
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.abort()
        return len(idle)

    async def preconnect(self, count: int, *, batch: int = 32) -> int:
        """Open idle connections until ``count`` reusable ones are idle (at most
        ``max_connections`` open), at most ``batch`` connects at a time; returns the number idle.
        EngineConnectError or EngineTimeoutError when a connect fails."""
        if self._closed:
            raise RuntimeError("the engine client has been closed")
        stale = [conn for conn in self._idle if not self._reusable(conn)]
        for conn in stale:  # past the expiry or closed by the server: replaced now, not at send
            self._idle.remove(conn)
            conn.abort()
        target = min(count, self._max)
        while len(self._idle) < target and self._open < self._max:
            wave = min(batch, target - len(self._idle), self._max - self._open)
            self._open += wave
            results = await asyncio.gather(
                *(self._connect() for _ in range(wave)), return_exceptions=True
            )
            failure: BaseException | None = None
            for result in results:
                if isinstance(result, Connection):
                    self.release(result)
                else:
                    self._open -= 1  # that connect never took its slot
                    self._wake()
                    failure = failure or result
            if isinstance(failure, _ConnectTimeout):
                raise EngineTimeoutError(
                    f"cannot connect to {self.origin} within {self._connect_timeout_s:g} s"
                ) from failure
            if isinstance(failure, OSError):
                raise EngineConnectError(
                    f"cannot reach {self.origin}: {describe(failure)}"
                ) from failure
            if failure is not None:
                raise failure
        return len(self._idle)

    async def _connect(self) -> Connection:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self._connect_timeout_s):
                _, conn = await loop.create_connection(
                    lambda: Connection(self, self._clock), self._host, self._port
                )
        except TimeoutError as exc:
            raise _ConnectTimeout from exc
        conn.counted = True
        conn.idle_since_ns = self._idle_clock()
        self._all.add(conn)
        return conn

    def release(self, conn: Connection, *, used: bool = True) -> None:
        """A connection's answer ended and it can carry the next request (``used`` False: it
        carried none, so it has been idle since it was last released)."""
        if self._closed or conn.closed:
            conn.abort()
            return
        if used:
            conn.idle_since_ns = self._idle_clock()
        waiters = self._waiters
        while waiters:
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(conn)
                return
        self._idle.append(conn)

    def lost(self, conn: Connection) -> None:
        """A connection closed: free its slot for a waiting caller."""
        self._all.discard(conn)
        if conn in self._idle:
            self._idle.remove(conn)
        if conn.counted:
            conn.counted = False
            self._open -= 1
            self._wake()

    def _wake(self) -> None:
        waiters = self._waiters
        while waiters:
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    async def aclose(self) -> None:
        """Close every connection; waiting callers get a RuntimeError."""
        self._closed = True
        for conn in list(self._all):
            conn.abort()
        self._idle.clear()
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
        await asyncio.sleep(0)  # let the transports run connection_lost
