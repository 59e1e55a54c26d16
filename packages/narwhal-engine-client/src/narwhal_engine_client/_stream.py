"""One streaming completion: the SSE consumer and its StreamRecord.

The hot path, per network read: take the time once; split the bytes into lines; for each ``data:``
line of a content event (``choices`` non-empty), decode the JSON, count the tokens and append the
time and the count. Nothing else happens per chunk. Request-level failures are recorded in
``StreamRecord.error``, never raised.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from narwhal_engine_client._errors import (
    EngineClientError,
    EngineConnectError,
    EngineProtocolError,
    EngineStreamError,
    EngineTimeoutError,
    StreamCutError,
    http_error,
)

_loads: Callable[[bytes], Any]
try:  # optional fast path; orjson is not a dependency of this package
    from orjson import loads as _loads
except ImportError:  # pragma: no cover - exercised only where orjson is absent
    _loads = json.loads

_ERROR_BODY_LIMIT = 65536


@dataclass(slots=True)
class StreamRecord:
    """What one streaming completion did, with monotonic nanosecond times from the client's clock.

    ``chunk_ns[i]`` is the arrival time of the network read that carried content chunk ``i`` (a
    chunk whose ``choices`` is non-empty) and ``chunk_tokens[i]`` its token count:
    ``len(token_ids)`` when the engine sent token ids, else the growth of
    ``usage.completion_tokens`` (continuous usage stats), else 1. ``bytes_sent`` is the request body
    size; ``bytes_received`` the response body bytes read.
    """

    request_id: str
    send_ns: int
    chunk_ns: list[int] = field(default_factory=list)
    chunk_tokens: list[int] = field(default_factory=list)
    first_token_ns: int | None = None
    last_token_ns: int | None = None
    end_ns: int | None = None
    http_status: int | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str | None = None
    token_ids: list[int] | None = None
    bytes_sent: int = 0
    bytes_received: int = 0
    error: EngineClientError | None = None

    @property
    def ok(self) -> bool:
        """True when the stream reached ``[DONE]`` with content and no error."""
        return self.error is None and self.end_ns is not None

    @property
    def ttft_s(self) -> float | None:
        """Time to first token, seconds: first content chunk minus send (``vllm bench serve``)."""
        if self.first_token_ns is None:
            return None
        return (self.first_token_ns - self.send_ns) / 1e9

    @property
    def tpot_s(self) -> float | None:
        """Time per output token, s: (last - first content chunk) / (completion_tokens - 1)."""
        n = self.completion_tokens
        if n is None or n <= 1 or self.first_token_ns is None or self.last_token_ns is None:
            return None
        return (self.last_token_ns - self.first_token_ns) / (n - 1) / 1e9

    @property
    def e2e_s(self) -> float | None:
        """End-to-end latency, seconds: last content chunk minus send (``vllm bench serve``)."""
        if self.last_token_ns is None:
            return None
        return (self.last_token_ns - self.send_ns) / 1e9


class _Consumer:
    """Parses SSE lines into a StreamRecord; ``feed`` is True at ``[DONE]`` or a terminal error."""

    __slots__ = ("_keep", "_seen_usage", "rec")

    def __init__(self, record: StreamRecord, keep_token_ids: bool) -> None:
        self.rec = record
        self._keep = keep_token_ids
        self._seen_usage = 0

    def feed(self, line: bytes, now: int) -> bool:
        if not line.startswith(b"data:"):
            return False  # blank separator, ": keep-alive" comment, or an unused SSE field
        payload = line[5:].strip()
        if payload == b"[DONE]":
            self.rec.end_ns = now
            return True
        try:
            event = _loads(payload)
        except ValueError:
            return self._fail(EngineProtocolError(f"unparseable SSE event: {payload[:200]!r}"), now)
        if not isinstance(event, dict):
            return self._fail(
                EngineProtocolError(f"SSE event is not an object: {payload[:200]!r}"), now
            )
        choices = event.get("choices")
        if choices:
            try:
                return self._content(event, choices, now)
            except (AttributeError, TypeError):  # a choice or token_ids of the wrong type
                error = EngineProtocolError(f"ill-typed SSE event: {payload[:200]!r}")
                return self._fail(error, now)
        if "error" in event:
            return self._fail(_stream_error(event["error"]), now)
        usage = event.get("usage")
        if usage:
            self._usage(usage)
        return False

    def _content(self, event: dict[str, Any], choices: list[Any], now: int) -> bool:
        rec = self.rec
        tokens = -1
        for choice in choices:
            ids = choice.get("token_ids")
            if ids is not None:
                tokens = len(ids) if tokens < 0 else tokens + len(ids)
                if self._keep:
                    if rec.token_ids is None:
                        rec.token_ids = []
                    rec.token_ids.extend(ids)
            reason = choice.get("finish_reason")
            if reason is not None:
                rec.finish_reason = reason
        usage = event.get("usage")
        if usage:
            before = self._seen_usage
            self._usage(usage)
            if tokens < 0 and rec.completion_tokens is not None:
                tokens = rec.completion_tokens - before
        if tokens < 0:
            tokens = 1
        if rec.first_token_ns is None:
            rec.first_token_ns = now
        rec.last_token_ns = now
        rec.chunk_ns.append(now)
        rec.chunk_tokens.append(tokens)
        return False

    def _usage(self, usage: Any) -> None:
        if not isinstance(usage, dict):
            return
        prompt = usage.get("prompt_tokens")
        completion = usage.get("completion_tokens")
        if isinstance(prompt, int):
            self.rec.prompt_tokens = prompt
        if isinstance(completion, int):
            self.rec.completion_tokens = completion
            self._seen_usage = completion

    def _fail(self, error: EngineClientError, now: int) -> bool:
        self.rec.error = error
        self.rec.end_ns = now
        return True


def _stream_error(payload: Any) -> EngineStreamError:
    if isinstance(payload, dict):
        message = payload.get("message")
        code = payload.get("code")
        return EngineStreamError(
            message if isinstance(message, str) else json.dumps(payload),
            code if isinstance(code, int | str) else None,
        )
    return EngineStreamError(payload if isinstance(payload, str) else json.dumps(payload))


async def run_stream(
    http: httpx.AsyncClient,
    request: httpx.Request,
    *,
    request_id: str,
    clock_ns: Callable[[], int],
    deadline_s: float,
    keep_token_ids: bool,
    bytes_sent: int,
) -> StreamRecord:
    """Send ``request`` and consume its SSE answer into a StreamRecord; never raises request-level
    errors.
    """
    record = StreamRecord(request_id=request_id, send_ns=0, bytes_sent=bytes_sent)
    if keep_token_ids:
        record.token_ids = []
    consumer = _Consumer(record, keep_token_ids)
    feed = consumer.feed
    response: httpx.Response | None = None

    async def trace(name: str, info: object) -> None:
        # The send time is when the request head starts onto the wire, not when httpx started
        # preparing it: pool bookkeeping costs 0.5-3 ms, which would inflate every TTFT.
        if name == "http11.send_request_headers.started":
            record.send_ns = clock_ns()

    request.extensions["trace"] = trace
    try:
        async with asyncio.timeout(deadline_s):
            record.send_ns = clock_ns()  # replaced by the trace hook once the head is written
            response = await http.send(request, stream=True)
            record.http_status = response.status_code
            if response.status_code != 200:
                body = await _read_limited(response)
                record.end_ns = clock_ns()
                record.error = http_error(response.status_code, body, response.reason_phrase)
                return record
            done = False
            pending = b""
            try:
                async for data in response.aiter_bytes():
                    now = clock_ns()
                    if pending:
                        data = pending + data
                    lines = data.split(b"\n")
                    pending = lines.pop()
                    for line in lines:
                        if feed(line, now):
                            done = True
                            break
                    if done:
                        break
                if not done and pending:
                    done = feed(pending, clock_ns())
            except httpx.TimeoutException:
                raise
            except httpx.TransportError as exc:
                record.end_ns = clock_ns()
                record.error = StreamCutError(
                    f"connection broke after {len(record.chunk_ns)} content chunks: "
                    f"{_describe(exc)}"
                )
                return record
            _finish(record, done, clock_ns)
    except (TimeoutError, httpx.TimeoutException) as exc:
        record.end_ns = clock_ns()
        what = _describe(exc) if isinstance(exc, httpx.TimeoutException) else "deadline"
        record.error = EngineTimeoutError(
            f"request {request_id} timed out ({what}, limit {deadline_s:g} s) "
            f"after {len(record.chunk_ns)} content chunks"
        )
    except httpx.TransportError as exc:
        record.end_ns = clock_ns()
        record.error = EngineConnectError(f"cannot reach {_origin(request)}: {_describe(exc)}")
    except httpx.HTTPError as exc:
        record.end_ns = clock_ns()
        record.error = EngineProtocolError(
            f"bad response from {_origin(request)}: {_describe(exc)}"
        )
    finally:
        if response is not None:
            record.bytes_received = response.num_bytes_downloaded
            await response.aclose()
    return record


def _finish(record: StreamRecord, done: bool, clock_ns: Callable[[], int]) -> None:
    if record.error is not None:
        return
    if not done:
        record.end_ns = clock_ns()
        record.error = StreamCutError(
            f"stream ended before [DONE] after {len(record.chunk_ns)} content chunks"
        )
        return
    if not record.chunk_ns:
        record.error = EngineProtocolError("stream reached [DONE] without any content chunk")
        return
    if record.completion_tokens is None:
        record.completion_tokens = sum(record.chunk_tokens)


async def _read_limited(response: httpx.Response) -> bytes:
    parts: list[bytes] = []
    size = 0
    async for data in response.aiter_bytes():
        parts.append(data)
        size += len(data)
        if size >= _ERROR_BODY_LIMIT:
            break
    return b"".join(parts)


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _origin(request: httpx.Request) -> str:
    url = request.url
    return f"{url.scheme}://{url.host}:{url.port}" if url.port else f"{url.scheme}://{url.host}"
