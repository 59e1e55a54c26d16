"""The StreamRecord and the SSE consumer shared by both stream transports (httpx and raw).

A transport hands the consumer each network read of the response body (already de-chunked) with
the time it took once for that read: ``push(data, now)``. The consumer splits the bytes into lines
and, for each ``data:`` line of a content event (``choices`` non-empty), decodes the JSON, counts
the tokens and appends the time and the count. Nothing else happens per chunk. ``finish`` turns
the end of the body into the record's final state, so every transport gives identical records.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from narwhal_engine_client._errors import (
    EngineClientError,
    EngineProtocolError,
    EngineStreamError,
    EngineTimeoutError,
    SendDeadlineError,
    StreamCutError,
)

_loads: Callable[[bytes], Any]
try:  # optional fast path; orjson is not a dependency of this package
    from orjson import loads as _loads
except ImportError:  # pragma: no cover - exercised only where orjson is absent
    _loads = json.loads

ERROR_BODY_LIMIT = 65536
"""Bytes of a non-200 body read for its error message; the rest is not read."""


@dataclass(slots=True)
class StreamRecord:
    """What one streaming completion did, with monotonic nanosecond times from the client's clock.

    ``chunk_ns[i]`` is the arrival time of the network read that carried content chunk ``i`` (a
    chunk whose ``choices`` is non-empty) and ``chunk_tokens[i]`` its token count:
    ``len(token_ids)`` when the engine sent token ids, else the growth of
    ``usage.completion_tokens`` (continuous usage stats). A chunk that carried neither is counted
    as 1 and also in ``uncounted_chunks``: its count is a guess, and such a stream must never be
    turned into a per-token time (``counted`` is False). A completed stream whose counted chunks
    do not add up to ``usage.completion_tokens`` ends in an ``EngineProtocolError``; a stream cut
    short keeps the tokens its chunks carried in ``completion_tokens``. ``bytes_sent`` is the
    request body size; ``bytes_received`` the response body bytes read. A request refused for its
    send deadline (``SendDeadlineError``) was never written: ``send_ns`` is when that was decided,
    and ``bytes_sent`` is 0.

    ``resends`` is 1 when the request was written on a reused keep-alive connection that the
    server closed before sending a single response byte (it never answered it), and so was sent
    once more on a new connection; every time in the record is then the resend's.
    """

    request_id: str
    send_ns: int
    chunk_ns: list[int] = field(default_factory=list)
    chunk_tokens: list[int] = field(default_factory=list)
    end_ns: int | None = None
    http_status: int | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str | None = None
    token_ids: list[int] | None = None
    bytes_sent: int = 0
    bytes_received: int = 0
    uncounted_chunks: int = 0
    resends: int = 0
    error: EngineClientError | None = None

    @property
    def counted(self) -> bool:
        """True when every content chunk's token count came from the engine (ids or usage)."""
        return self.uncounted_chunks == 0

    @property
    def first_token_ns(self) -> int | None:
        """Arrival of the first content chunk (``chunk_ns[0]``); None before any."""
        return self.chunk_ns[0] if self.chunk_ns else None

    @property
    def last_token_ns(self) -> int | None:
        """Arrival of the last content chunk (``chunk_ns[-1]``); None before any."""
        return self.chunk_ns[-1] if self.chunk_ns else None

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


class Consumer:
    """Parses an SSE body into a StreamRecord.

    ``push(data, now)`` takes one network read and returns True once the stream is over for the
    record (``[DONE]`` or a terminal error); ``close(clock_ns)`` feeds a last unterminated line
    at the end of the body. ``done`` tells whether ``[DONE]`` or a terminal error was seen.
    """

    __slots__ = ("_ids", "_pending", "_seen_usage", "done", "rec")

    def __init__(self, record: StreamRecord, keep_token_ids: bool) -> None:
        self.rec = record
        self._ids: list[int] | None = [] if keep_token_ids else None
        record.token_ids = self._ids
        self._seen_usage = 0
        self._pending = b""
        self.done = False

    def push(self, data: bytes, now: int) -> bool:
        """Feed one read's bytes; True when the stream is over (``[DONE]`` or an error)."""
        if self._pending:
            data = self._pending + data
        lines = data.split(b"\n")
        self._pending = lines.pop()
        feed = self.feed
        for line in lines:
            if feed(line, now):
                self.done = True
                return True
        return False

    def close(self, clock_ns: Callable[[], int]) -> bool:
        """The body ended: feed a last line that had no newline (timed now); True when done."""
        if not self.done and self._pending:
            pending, self._pending = self._pending, b""
            self.done = self.feed(pending, clock_ns())
        return self.done

    def feed(self, line: bytes, now: int) -> bool:
        """One SSE line; True at ``[DONE]`` or a terminal error."""
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
            return self._fail(stream_error(event["error"]), now)
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
                if self._ids is not None:
                    self._ids.extend(ids)
            reason = choice.get("finish_reason")
            if reason is not None:
                rec.finish_reason = reason
        usage = event.get("usage")
        if usage:
            before = self._seen_usage
            self._usage(usage)
            if tokens < 0 and rec.completion_tokens is not None:
                tokens = rec.completion_tokens - before
        if tokens < 0:  # neither token_ids nor continuous usage: a guess, flagged
            tokens = 1
            rec.uncounted_chunks += 1
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


def stream_error(payload: Any) -> EngineStreamError:
    """The EngineStreamError of a mid-stream ``{"error": ...}`` event."""
    if isinstance(payload, dict):
        message = payload.get("message")
        code = payload.get("code")
        return EngineStreamError(
            message if isinstance(message, str) else json.dumps(payload),
            code if isinstance(code, int | str) else None,
        )
    return EngineStreamError(payload if isinstance(payload, str) else json.dumps(payload))


def finish(record: StreamRecord, done: bool, clock_ns: Callable[[], int]) -> None:
    """The body ended (``done``: at ``[DONE]`` or an error event): settle the record's outcome."""
    if record.error is not None:
        return
    if not done:
        record.end_ns = clock_ns()
        record.error = StreamCutError(
            f"stream ended before [DONE] after {len(record.chunk_ns)} content chunks"
        )
        keep_received(record)
        return
    if not record.chunk_ns:
        record.error = EngineProtocolError("stream reached [DONE] without any content chunk")
        return
    usage = record.completion_tokens
    if not record.counted:
        if usage is None:
            record.error = EngineProtocolError(
                f"request {record.request_id}: no usage chunk and no per-chunk token counts "
                f"(token_ids or continuous usage) in {len(record.chunk_ns)} content chunks: "
                "its output token count is unknown"
            )
        return
    counted = sum(record.chunk_tokens)
    if usage is None:
        record.completion_tokens = counted
    elif counted != usage:
        record.error = EngineProtocolError(
            f"request {record.request_id}: its {len(record.chunk_ns)} content chunks carried "
            f"{counted} tokens but usage.completion_tokens is {usage}"
        )


def keep_received(record: StreamRecord) -> None:
    """A stream that ended early keeps, as ``completion_tokens``, the tokens its chunks carried
    (left as it is when a chunk's count was a guess)."""
    if record.counted and record.chunk_ns:
        record.completion_tokens = sum(record.chunk_tokens)


def timed_out(record: StreamRecord, now: int, what: str, limit_s: float) -> None:
    """The request's deadline (or a network operation's) passed: an EngineTimeoutError in the
    record, which keeps the tokens its chunks carried."""
    record.end_ns = now
    record.error = EngineTimeoutError(
        f"request {record.request_id} timed out ({what}, limit {limit_s:g} s) "
        f"after {len(record.chunk_ns)} content chunks"
    )
    keep_received(record)


def broken(record: StreamRecord, now: int, why: str) -> None:
    """The connection broke while the body was being read: a StreamCutError in the record."""
    record.end_ns = now
    record.error = StreamCutError(
        f"connection broke after {len(record.chunk_ns)} content chunks: {why}"
    )
    keep_received(record)


def too_late(record: StreamRecord, now: int, send_by_ns: int | None) -> bool:
    """Whether the request, about to be written at ``now``, is past ``send_by_ns``; if so the
    record becomes a SendDeadlineError with ``send_ns = end_ns = now`` and nothing is sent.

    A resend (``record.resends``) past the deadline is refused the same way: its first send was
    never answered, and a late resend would be a late send.
    """
    if send_by_ns is None or now <= send_by_ns:
        return False
    record.send_ns = record.end_ns = now
    late = f"{(now - send_by_ns) / 1e6:.3f} ms past its send deadline"
    if record.resends:
        why = f"not resent: {late} (its first send went on a connection the server had closed)"
    else:
        record.bytes_sent = 0
        why = f"not sent: {late}"
    record.error = SendDeadlineError(f"request {record.request_id} {why}")
    return True


def restart(record: StreamRecord) -> None:
    """Clear what a send that was never answered left in ``record`` and count the resend; the
    next send stamps ``send_ns`` again."""
    record.resends += 1
    record.error = None
    record.end_ns = None
    record.http_status = None
    record.bytes_received = 0
    record.chunk_ns.clear()
    record.chunk_tokens.clear()
    record.prompt_tokens = record.completion_tokens = None
    record.finish_reason = None
    record.uncounted_chunks = 0


def describe(exc: BaseException) -> str:
    """``Type: message`` of an exception (just the type when the message is empty)."""
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
