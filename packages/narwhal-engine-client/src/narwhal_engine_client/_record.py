"""The StreamRecord, what one streaming completion did, and how a transport settles its outcome.

Both stream transports (httpx and raw) fill a ``StreamRecord`` through the SSE consumer
(``_sse.Consumer``) and settle it with the same functions: ``finish`` turns the end of the body
into the record's final state, ``timed_out``, ``broken`` and ``too_late`` record a deadline, a
broken connection or a missed send deadline, and ``restart`` clears a send that was never
answered before it is resent. So every transport gives identical records.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from narwhal_engine_client._errors import (
    EngineClientError,
    EngineProtocolError,
    EngineTimeoutError,
    SendDeadlineError,
    StreamCutError,
)


@dataclass(slots=True)
class StreamRecord:
    """What one streaming completion did, with monotonic nanosecond times from the client's clock.

    ``chunk_ns[i]`` is the arrival time of the network read that carried content chunk ``i`` (a
    chunk whose ``choices`` is non-empty) and ``chunk_tokens[i]`` its token count:
    ``len(token_ids)`` when the engine sent token ids, else the growth of
    ``usage.completion_tokens`` (continuous usage stats). A chunk counted at zero tokens (the
    empty ``finish_reason`` chunk some frontends, Dynamo's among them, close a stream with) is no
    content chunk: no token arrived with it. A chunk that carried neither is counted
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
