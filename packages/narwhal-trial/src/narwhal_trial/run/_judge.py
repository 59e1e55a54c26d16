"""Turning one offer's outcome into its ``requests.jsonl`` record: status, timings and the good
verdict.

Definitions follow ``vllm bench serve``: TTFT = first content chunk - send; TPOT = (last content
chunk - first content chunk) / (output tokens - 1); E2E = last content chunk - send; output tokens
as the server counted them. A request is good when it completed with all requested output tokens,
TTFT ≤ the TTFT bound and TPOT ≤ the TPOT bound, compared exactly on integer nanoseconds against the
decimal bounds.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from narwhal_engine_client import (
    EngineConnectError,
    EngineHTTPError,
    EngineStreamError,
    EngineTimeoutError,
    StreamCutError,
    StreamRecord,
)
from narwhal_trial._stats import tpot_within, within_ns
from narwhal_trial.documents._records import MissReason, RequestRecord, Status


@dataclass(frozen=True, slots=True)
class Bounds:
    """What makes a request good."""

    ttft_s: Decimal
    tpot_s: Decimal
    output_tokens: int
    per_request: tuple[int, ...] | None = None
    """A scheduled workload's output tokens, request by request (None: ``output_tokens``)."""

    def expected(self, sequence: int) -> int:
        """The output tokens request ``sequence`` must return to be good."""
        if self.per_request is None:
            return self.output_tokens
        return self.per_request[sequence]


@dataclass(slots=True)
class Outcome:
    """How one offer ended, as the run loop saw it; turned into a record off the hot path."""

    sequence: int
    request_id: str
    due_ns: int
    decided_ns: int
    in_flight: int
    miss: MissReason | None = None
    stream: StreamRecord | None = None
    interrupted: bool = False
    start_ns: int | None = None
    """For an offer interrupted in flight: the clock just before it was handed to the engine
    client."""
    end_ns: int | None = None
    """For an interrupted offer: when it was closed."""
    resends: int = 0
    """For a lag miss: 1 when it was the resend that came too late (``StreamRecord.resends``)."""


def status_of(stream: StreamRecord) -> Status:
    """The terminal status of a sent request from its StreamRecord."""
    error = stream.error
    if error is None:
        return "completed" if stream.ok else "stream_cut"
    if isinstance(error, EngineHTTPError):
        return "http_error"
    if isinstance(error, EngineStreamError):
        return "stream_error"
    if isinstance(error, StreamCutError):
        return "stream_cut"
    if isinstance(error, EngineTimeoutError):
        return "timeout"
    if isinstance(error, EngineConnectError):
        return "connect_error"
    return "protocol_error"


def _s(ns: int | None, t0_ns: int) -> float | None:
    return None if ns is None else (ns - t0_ns) / 1e9


def judge(outcome: Outcome, t0_ns: int, bounds: Bounds) -> RequestRecord:
    """The record of one offer; ``t0_ns`` is the schedule origin, so times are seconds from it."""
    stream = outcome.stream
    if stream is None:
        return _unsent(outcome, t0_ns)
    status = "interrupted" if outcome.interrupted else status_of(stream)
    first, last, tokens = stream.first_token_ns, stream.last_token_ns, stream.completion_tokens
    good = (
        status == "completed"
        and first is not None
        and last is not None
        and tokens == bounds.expected(outcome.sequence)
        and within_ns(first - stream.send_ns, bounds.ttft_s)
        and tpot_within(last - first, tokens, bounds.tpot_s)
    )
    return RequestRecord(
        sequence=outcome.sequence,
        request_id=outcome.request_id,
        due_s=(outcome.due_ns - t0_ns) / 1e9,
        in_flight=outcome.in_flight,
        sent=True,
        sent_s=_s(stream.send_ns, t0_ns),
        lag_s=(stream.send_ns - outcome.due_ns) / 1e9,
        end_s=_s(stream.end_ns, t0_ns),
        status=status,
        miss_reason=None,
        http_status=stream.http_status,
        error="interrupted while in flight" if outcome.interrupted else _error_text(stream),
        ttft_s=stream.ttft_s,
        tpot_s=stream.tpot_s,
        e2e_s=stream.e2e_s,
        prompt_tokens=stream.prompt_tokens,
        completion_tokens=tokens,
        chunks=len(stream.chunk_ns),
        finish_reason=stream.finish_reason,
        bytes_sent=stream.bytes_sent,
        bytes_received=stream.bytes_received,
        good=good,
        resends=stream.resends,
    )


def _unsent(outcome: Outcome, t0_ns: int) -> RequestRecord:
    """A schedule miss, or an offer interrupted before its StreamRecord existed."""
    started = outcome.start_ns
    end = outcome.end_ns if outcome.end_ns is not None else outcome.decided_ns
    return RequestRecord(
        sequence=outcome.sequence,
        request_id=outcome.request_id,
        due_s=(outcome.due_ns - t0_ns) / 1e9,
        in_flight=outcome.in_flight,
        sent=started is not None,
        sent_s=_s(started, t0_ns),
        lag_s=((outcome.decided_ns if started is None else started) - outcome.due_ns) / 1e9,
        end_s=_s(end, t0_ns),
        status="interrupted" if outcome.interrupted else "client_schedule_miss",
        miss_reason=outcome.miss,
        http_status=None,
        error=_unsent_text(outcome),
        ttft_s=None,
        tpot_s=None,
        e2e_s=None,
        prompt_tokens=None,
        completion_tokens=None,
        chunks=0,
        finish_reason=None,
        bytes_sent=0,
        bytes_received=0,
        good=False,
        resends=outcome.resends,
    )


def _unsent_text(outcome: Outcome) -> str:
    if outcome.interrupted:
        return (
            "interrupted while in flight"
            if outcome.start_ns is not None
            else "interrupted before sending"
        )
    if outcome.miss == "in_flight_cap":
        return f"not sent: {outcome.in_flight} requests already in flight at the due time"
    lag_ms = (outcome.decided_ns - outcome.due_ns) / 1e6
    if outcome.resends:
        return (
            f"not resent: {lag_ms:.3f} ms late, beyond the lag limit (its first send went on a "
            "kept-alive connection the server closed before answering)"
        )
    return f"not sent: {lag_ms:.3f} ms late, beyond the lag limit"


def _error_text(stream: StreamRecord) -> str | None:
    return None if stream.error is None else str(stream.error)
