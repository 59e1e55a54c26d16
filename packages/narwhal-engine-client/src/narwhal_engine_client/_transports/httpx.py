"""One streaming completion over httpx (the default stream transport).

The hot path, per network read: take the time once and hand the bytes to the shared SSE consumer
(``_sse.Consumer.push``), which does the line splitting, decoding and token counting for both
transports. Request-level failures are recorded in ``StreamRecord.error``, never raised.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import httpx

from narwhal_engine_client._errors import (
    ERROR_BODY_LIMIT,
    EngineConnectError,
    EngineProtocolError,
    describe,
    http_error,
)
from narwhal_engine_client._record import (
    StreamRecord,
    broken,
    finish,
    restart,
    timed_out,
    too_late,
)
from narwhal_engine_client._resend import copy_request, unanswered
from narwhal_engine_client._sse import Consumer

__all__ = ["run_stream"]


class _TooLate(Exception):
    """Raised from the trace hook: the head would start past the send deadline; not sent."""


async def run_stream(
    http: httpx.AsyncClient,
    request: httpx.Request,
    *,
    request_id: str,
    clock_ns: Callable[[], int],
    deadline_s: float,
    keep_token_ids: bool,
    bytes_sent: int,
    send_by_ns: int | None = None,
    on_sent: Callable[[], None] | None = None,
    fresh: Callable[[], httpx.AsyncClient] | None = None,
) -> StreamRecord:
    """Send ``request`` and consume its SSE answer into a StreamRecord; never raises request-level
    errors. With ``send_by_ns``, a request whose head would start later is not sent
    (SendDeadlineError; httpx then closes the connection it had picked).

    A request written on a reused keep-alive connection that the server closed before sending a
    single byte was never answered (the server closed it as idle while the request was on its
    way). It is sent once more, through ``fresh()`` (a client that opens a new connection), with
    the same ``send_by_ns``; ``on_sent`` is not called again. Nothing else is retried.
    """
    record = StreamRecord(request_id=request_id, send_ns=0, bytes_sent=bytes_sent)
    record.send_ns = clock_ns()  # replaced by the trace hook once the head is written
    if too_late(record, record.send_ns, send_by_ns):
        return record
    try:
        async with asyncio.timeout(deadline_s):
            unanswered = await _attempt(
                http, request, record, clock_ns, deadline_s, keep_token_ids, send_by_ns, on_sent
            )
            if unanswered and fresh is not None:
                restart(record)
                again = copy_request(request)
                await _attempt(
                    fresh(), again, record, clock_ns, deadline_s, keep_token_ids, send_by_ns, None
                )
    except TimeoutError:
        timed_out(record, clock_ns(), "deadline", deadline_s)
    return record


async def _attempt(
    http: httpx.AsyncClient,
    request: httpx.Request,
    record: StreamRecord,
    clock_ns: Callable[[], int],
    deadline_s: float,
    keep_token_ids: bool,
    send_by_ns: int | None,
    on_sent: Callable[[], None] | None,
) -> bool:
    """One send of ``request`` into ``record``; True when it went on a reused connection that
    closed before a single response byte (never answered: the caller may send it again)."""
    consumer = Consumer(record, keep_token_ids)
    push = consumer.push
    response: httpx.Response | None = None
    connected = False

    async def trace(name: str, info: object) -> None:
        # The send time is when the request head starts onto the wire, not when httpx started
        # preparing it: pool bookkeeping costs 0.5-3 ms, which would inflate every TTFT.
        nonlocal connected
        if name == "http11.send_request_headers.started":
            now = record.send_ns = clock_ns()
            if send_by_ns is not None and now > send_by_ns:
                raise _TooLate
            if on_sent is not None:
                on_sent()
        elif name == "connection.connect_tcp.started":
            connected = True  # a new connection: its silence is not an idle close

    request.extensions["trace"] = trace
    try:
        response = await http.send(request, stream=True)
        record.http_status = response.status_code
        if response.status_code != 200:
            body = await _read_limited(response)
            record.end_ns = clock_ns()
            record.error = http_error(response.status_code, body, response.reason_phrase)
            return False
        try:
            async for data in response.aiter_bytes():
                if push(data, clock_ns()):
                    break
            else:
                consumer.close(clock_ns)
        except httpx.TimeoutException:
            raise
        except httpx.TransportError as exc:
            broken(record, clock_ns(), describe(exc))
            return False
        finish(record, consumer.done, clock_ns)
    except _TooLate:
        too_late(record, record.send_ns, send_by_ns)
    except httpx.TimeoutException as exc:
        timed_out(record, clock_ns(), describe(exc), deadline_s)
    except httpx.TransportError as exc:
        record.end_ns = clock_ns()
        record.error = EngineConnectError(f"cannot reach {_origin(request)}: {describe(exc)}")
        return response is None and not connected and unanswered(exc)
    except httpx.HTTPError as exc:
        record.end_ns = clock_ns()
        record.error = EngineProtocolError(f"bad response from {_origin(request)}: {describe(exc)}")
    finally:
        if response is not None:
            record.bytes_received = response.num_bytes_downloaded
            await response.aclose()
    return False


async def _read_limited(response: httpx.Response) -> bytes:
    parts: list[bytes] = []
    size = 0
    async for data in response.aiter_bytes():
        parts.append(data)
        size += len(data)
        if size >= ERROR_BODY_LIMIT:
            break
    return b"".join(parts)


def _origin(request: httpx.Request) -> str:
    url = request.url
    return f"{url.scheme}://{url.host}:{url.port}" if url.port else f"{url.scheme}://{url.host}"
