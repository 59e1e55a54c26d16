"""One keep-alive HTTP/1.1 connection of the raw stream transport (an ``asyncio.Protocol``).

A request is written in one ``transport.write``. The answer is parsed inside ``data_received``, with
no task switch and no stream reader in between: the time is taken once per read, the head is parsed
once (``framing.parse_head``), a ``framing.BodyReader`` strips the chunked framing (or
``Content-Length``, or read-until-close) with a few slices, and the body bytes go straight to the
shared SSE consumer (``_sse.Consumer.push``). A non-200 answer's body (up to ``ERROR_BODY_LIMIT``)
becomes ``http_error(...)``. After ``[DONE]`` the record is settled at once and the rest of the
body (the chunked terminator) is read in the background; the connection then goes back to its
pool, or is closed when it cannot be reused.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, cast

from narwhal_engine_client._errors import (
    ERROR_BODY_LIMIT,
    EngineConnectError,
    describe,
    http_error,
)
from narwhal_engine_client._record import StreamRecord, broken, finish, too_late
from narwhal_engine_client._sse import Consumer
from narwhal_engine_client._transports.framing import (
    CLOSE,
    BodyReader,
    FramingError,
    Head,
    parse_head,
)

if TYPE_CHECKING:
    from narwhal_engine_client._transports.raw import RawStreamPool

_DRAIN_S = 10.0  # a settled answer whose body does not end within this is closed, not reused


class Connection(asyncio.Protocol):
    """One connection; at most one request in flight, answers parsed as they arrive."""

    def __init__(self, pool: RawStreamPool, clock_ns: Callable[[], int]) -> None:
        self.pool = pool
        self.clock = clock_ns
        self.loop = asyncio.get_running_loop()
        self.busy = False  # a request was written and its answer's body has not ended
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.counted = False  # holds one of the pool's connection slots (set by the pool)
        self.idle_since_ns = 0  # when it last became idle (set by the pool)
        self.unanswered = False  # the last request's connection closed before any answer byte
        self.rec: StreamRecord | None = None
        self.consumer: Consumer | None = None
        self.waiter: asyncio.Future[None] | None = None
        self.drain: asyncio.TimerHandle | None = None
        self.settled = True
        self.head_buf = b""
        self.head: Head | None = None
        self.body: BodyReader | None = None
        self.received = 0
        self.error_parts: list[bytes] = []

    # -- driven by the pool --
    def start(
        self,
        record: StreamRecord,
        consumer: Consumer,
        data: bytes,
        send_by_ns: int | None = None,
        on_sent: Callable[[], None] | None = None,
    ) -> asyncio.Future[None]:
        """Write one request (stamping ``send_ns`` and calling ``on_sent`` just before); the future
        settles with the record. Past ``send_by_ns`` nothing is written and the connection goes
        back to the pool.
        """
        assert self.transport is not None
        now = self.clock()
        if too_late(record, now, send_by_ns):
            done = self.loop.create_future()
            done.set_result(None)
            self.pool.release(self, used=False)
            return done
        self.rec = record
        self.consumer = consumer
        self.busy = True
        self.settled = False
        self.head = self.body = None
        self.received = 0
        self.error_parts = []
        self.unanswered = False
        waiter = self.waiter = self.loop.create_future()
        record.send_ns = now
        if self.closed:  # lost between the pool and here: nothing would ever answer
            self.unanswered = True
            record.end_ns = record.send_ns
            record.error = EngineConnectError(f"cannot reach {self.pool.origin}: connection lost")
            self._settle()
            return waiter
        if on_sent is not None:
            on_sent()
        self.transport.write(data)
        return waiter

    def detach(self, record: StreamRecord) -> bool:
        """The caller of ``record`` gives up (deadline, cancel): close the connection unless the
        record already settled (then the connection drains and is reused). True when it closed.
        """
        if self.rec is not record or self.settled:
            return False
        self.settled = True
        self.rec = self.consumer = None
        self.abort()
        return True

    @property
    def usable(self) -> bool:
        """Open, and no answer in progress: it can carry a request."""
        return not (self.closed or self.busy) and not (
            self.transport is None or self.transport.is_closing()
        )

    def abort(self) -> None:
        """Drop the connection now."""
        if self.transport is not None and not self.closed:
            self.transport.abort()

    # -- asyncio.Protocol --
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # Duck-typed, as asyncio's own streams take it: uvloop's TCP transport has every method of
        # asyncio.Transport without being a subclass of it.
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        now = self.clock()
        if not self.busy:
            self.abort()  # bytes nobody asked for: the connection is not trustworthy any more
            return
        body = self.body
        if body is None:
            try:
                rest = self._head(data)
            except FramingError as exc:
                self._framing_failed(exc, now)
                return
            if rest is None:
                return
            data = rest
            body = self.body
            assert body is not None
        payload = body.feed(data)
        if payload:
            self.received += len(payload)
            if not self.settled:
                consumer = self.consumer
                if consumer is not None:  # a 200 answer
                    if consumer.push(payload, now):
                        assert self.rec is not None
                        finish(self.rec, True, self.clock)
                        self._settle()
                else:
                    self._error_body(payload)
        if body.bad is not None:
            self._framing_failed(body.bad, now)
        elif body.done:
            self._body_end()
        elif self.settled and self.drain is None and not self.closed:
            self.drain = self.loop.call_later(_DRAIN_S, self.abort)

    def eof_received(self) -> bool | None:
        return None  # close our side too; connection_lost settles what is open

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.drain is not None:
            self.drain.cancel()
            self.drain = None
        self.pool.lost(self)
        if self.settled:
            return
        rec = self.rec
        assert rec is not None
        head = self.head
        if head is None:
            self.unanswered = not self.head_buf  # not one byte of an answer arrived
            why = describe(exc) if exc else "Server disconnected without sending a response."
            rec.end_ns = self.clock()
            rec.error = EngineConnectError(f"cannot reach {self.pool.origin}: {why}")
        elif head.framing == CLOSE and exc is None:
            self._body_end()
            return
        else:
            why = describe(exc) if exc else "peer closed connection before the body ended"
            if head.status == 200:
                broken(rec, self.clock(), why)
            else:
                rec.end_ns = self.clock()
                rec.error = EngineConnectError(f"cannot reach {self.pool.origin}: {why}")
        self._settle()

    # -- parsing --
    def _head(self, data: bytes) -> bytes | None:
        buf = self.head_buf + data if self.head_buf else data
        parsed = parse_head(buf)
        if parsed is None:
            self.head_buf = buf
            return None
        self.head_buf = b""
        head, rest = parsed
        self.head = head
        self.body = BodyReader(head)
        if head.status != 200:
            self.consumer = None  # the body is an error message, not SSE
        assert self.rec is not None
        self.rec.http_status = head.status
        return rest

    def _error_body(self, payload: bytes) -> None:
        self.error_parts.append(payload)
        if self.received >= ERROR_BODY_LIMIT:  # enough for the message; the rest is not read
            self._http_failed()
            self.abort()

    # -- outcomes --
    def _http_failed(self) -> None:
        rec = self.rec
        head = self.head
        assert rec is not None and head is not None
        rec.end_ns = self.clock()
        rec.error = http_error(head.status, b"".join(self.error_parts), head.reason)
        self._settle()

    def _body_end(self) -> None:
        if not self.settled:
            rec, consumer = self.rec, self.consumer
            assert rec is not None
            if consumer is not None:
                finish(rec, consumer.close(self.clock), self.clock)
                self._settle()
            else:
                self._http_failed()
        if self.drain is not None:
            self.drain.cancel()
            self.drain = None
        self.busy = False
        body = self.body
        if body is not None and body.reusable and body.done and not self.closed:
            self.rec = self.consumer = None
            self.pool.release(self)
        else:
            self.abort()

    def _framing_failed(self, exc: FramingError, now: int) -> None:
        rec = self.rec
        if not self.settled and rec is not None:
            why = f"RemoteProtocolError: {exc}"
            if self.head is None or self.head.status != 200:
                rec.end_ns = now
                rec.error = EngineConnectError(f"cannot reach {self.pool.origin}: {why}")
            else:
                broken(rec, now, why)
            self._settle()
        self.abort()

    def _settle(self) -> None:
        self.settled = True
        rec = self.rec
        if rec is not None:
            rec.bytes_received = self.received
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
        self.waiter = None
