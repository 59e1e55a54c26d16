"""The SSE consumer shared by both stream transports (httpx and raw).

A transport hands the consumer each network read of the response body (already de-chunked) with
the time it took once for that read: ``push(data, now)``. The consumer splits the bytes into lines
and, for each ``data:`` line of a content event (``choices`` non-empty), decodes the JSON, counts
the tokens and appends the time and the count to the ``StreamRecord``. Nothing else happens per
chunk. ``_record.finish`` then turns the end of the body into the record's final state.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from narwhal_engine_client._errors import (
    EngineClientError,
    EngineProtocolError,
    EngineStreamError,
)
from narwhal_engine_client._record import StreamRecord

_loads: Callable[[bytes], Any]
try:  # optional fast path; orjson is not a dependency of this package
    from orjson import loads as _loads
except ImportError:  # pragma: no cover - exercised only where orjson is absent
    _loads = json.loads


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
        if tokens == 0:  # counted and empty (a closing finish_reason chunk): no token arrived
            return False
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
