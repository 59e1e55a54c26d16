"""Unit tests of turning an offer's outcome into its record: statuses, metrics, the good verdict."""

from __future__ import annotations

from decimal import Decimal

from narwhal_engine_client import (
    EngineHTTPError,
    EngineStreamError,
    EngineTimeoutError,
    StreamCutError,
    StreamRecord,
)
from narwhal_trial.run._judge import Bounds, Outcome, judge

MS = 1_000_000
BOUNDS = Bounds(ttft_s=Decimal("2"), tpot_s=Decimal("0.0333"), output_tokens=128)


def _stream(ttft_ms: float = 500, tpot_ms: float = 20, tokens: int = 128) -> StreamRecord:
    send = 10 * MS
    first = send + int(ttft_ms * MS)
    last = first + int(tpot_ms * MS) * (tokens - 1)
    return StreamRecord(
        request_id="r",
        send_ns=send,
        chunk_ns=[first, last],
        chunk_tokens=[1, tokens - 1],
        end_ns=last + MS,
        http_status=200,
        prompt_tokens=8192,
        completion_tokens=tokens,
        finish_reason="length",
        bytes_sent=50_000,
        bytes_received=9_000,
    )


def _outcome(stream: StreamRecord | None = None, **kw: object) -> Outcome:
    fields: dict[str, object] = {
        "sequence": 3,
        "request_id": "run-000003",
        "due_ns": 9 * MS,
        "decided_ns": 9 * MS,
        "in_flight": 2,
        "stream": stream,
    }
    fields.update(kw)
    return Outcome(**fields)  # type: ignore[arg-type]


def test_good_request_record() -> None:
    """A complete stream within both bounds is good; times are seconds from t0."""
    rec = judge(_outcome(_stream()), t0_ns=0, bounds=BOUNDS)
    assert rec.status == "completed" and rec.good and rec.sent
    assert rec.ttft_s == 0.5
    assert abs(rec.tpot_s - 0.020) < 1e-12  # type: ignore[operator]
    assert rec.lag_s == 0.001 and rec.due_s == 0.009 and rec.sent_s == 0.010
    assert rec.completion_tokens == 128 and rec.chunks == 2 and rec.in_flight == 2


def test_bounds_and_token_count_decide_good() -> None:
    """Slow first token, slow tokens, or a short answer make a completed request not good."""
    assert not judge(_outcome(_stream(ttft_ms=2001)), 0, BOUNDS).good
    assert not judge(_outcome(_stream(tpot_ms=34)), 0, BOUNDS).good
    short = judge(_outcome(_stream(tokens=100)), 0, BOUNDS)
    assert short.status == "completed" and not short.good
    assert judge(_outcome(_stream(ttft_ms=2000, tpot_ms=33.3)), 0, BOUNDS).good


def test_failures_map_to_statuses() -> None:
    """Refusals, stream errors, cut streams and timeouts are recorded as such, never good."""
    cases = {
        "http_error": EngineHTTPError(503, "busy"),
        "stream_error": EngineStreamError("boom"),
        "stream_cut": StreamCutError("cut"),
        "timeout": EngineTimeoutError("slow"),
    }
    for status, error in cases.items():
        stream = _stream()
        stream.error = error
        rec = judge(_outcome(stream), 0, BOUNDS)
        assert rec.status == status and not rec.good and rec.error


def test_schedule_miss_and_interrupted_records() -> None:
    """A miss is terminal, unsent and not good; an interrupted offer keeps its send time."""
    miss = judge(_outcome(miss="in_flight_cap"), 0, BOUNDS)
    assert miss.status == "client_schedule_miss" and not miss.sent and not miss.good
    assert miss.miss_reason == "in_flight_cap" and "in flight" in (miss.error or "")
    late = judge(_outcome(miss="lag", decided_ns=80 * MS), 0, BOUNDS)
    assert late.miss_reason == "lag" and late.lag_s == 0.071
    cut = judge(_outcome(interrupted=True, start_ns=10 * MS, end_ns=20 * MS), 0, BOUNDS)
    assert cut.status == "interrupted" and cut.sent and cut.end_s == 0.02
