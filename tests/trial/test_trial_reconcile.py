"""Unit tests of reconciling client records with a router journal."""

from __future__ import annotations

from typing import Any

import pytest

from narwhal_trial import ReadError, RequestRecord, reconcile

RUN = "trial-20261130T000000Z-abcdef01"


def _record(n: int, status: str = "completed", **kw: Any) -> RequestRecord:
    sent = status != "client_schedule_miss"
    doc: dict[str, Any] = {
        "sequence": n,
        "request_id": f"{RUN}-{n:06d}",
        "due_s": n * 2.0,
        "sent": sent,
        "sent_s": n * 2.0 if sent else None,
        "lag_s": 0.0,
        "end_s": n * 2.0 + 1,
        "in_flight": 0,
        "status": status,
        "miss_reason": "in_flight_cap" if not sent else None,
        "http_status": 200 if status == "completed" else None,
        "error": None,
        "ttft_s": None,
        "tpot_s": None,
        "e2e_s": None,
        "prompt_tokens": None,
        "completion_tokens": 128 if status == "completed" else None,
        "chunks": 0,
        "finish_reason": None,
        "bytes_sent": 0,
        "bytes_received": 0,
        "good": False,
    }
    doc.update(kw)
    return RequestRecord.model_validate(doc)


def _entry(rid: str, status: str = "ok", **kw: Any) -> dict[str, Any]:
    return {"request_id": rid, "status": status, "http_status": 200, "completion_tokens": 128, **kw}


def test_every_record_matched() -> None:
    """Matched records, an absent schedule miss, the warm-up and foreign entries reconcile."""
    records = [
        _record(0),
        _record(1, "client_schedule_miss"),
        _record(2, "http_error", http_status=503),
    ]
    journal = [
        _entry(f"{RUN}-warmup"),
        _entry(f"{RUN}-000000"),
        _entry(f"{RUN}-000002", "error", http_status=503),
        _entry("other-run-000000"),
    ]
    result = reconcile(records, journal)
    assert result.ok, result.problems
    assert (result.matched, result.schedule_misses) == (2, 1)
    assert (result.warmup_entries, result.foreign_entries) == (1, 1)


@pytest.mark.parametrize(
    ("records", "journal", "problem"),
    [
        ([_record(0)], [], "no journal entry"),
        ([_record(0)], [_entry(f"{RUN}-000000")] * 2, "2 journal entries"),
        ([_record(0), _record(0)], [_entry(f"{RUN}-000000")], "2 client records"),
        ([_record(0)], [_entry(f"{RUN}-000000", "cut")], "journal says cut"),
        ([_record(0)], [_entry(f"{RUN}-000000", completion_tokens=64)], "output tokens"),
        ([_record(0, "client_schedule_miss")], [_entry(f"{RUN}-000000")], "schedule miss"),
        ([_record(0)], [_entry(f"{RUN}-000000"), _entry(f"{RUN}-000009")], "without a client"),
        (
            [_record(0, "http_error", http_status=429)],
            [_entry(f"{RUN}-000000", "error", http_status=503)],
            "HTTP 429",
        ),
    ],
)
def test_disagreements_are_reported(
    records: list[RequestRecord], journal: list[dict[str, Any]], problem: str
) -> None:
    """Unmatched, duplicated (either side) and disagreeing records make the run unreconciled."""
    result = reconcile(records, journal)
    assert not result.ok
    assert any(problem in p for p in result.problems), result.problems


def test_records_of_several_runs_are_refused() -> None:
    """One requests.jsonl belongs to one run."""
    other = _record(1).model_copy(update={"request_id": "trial-x-000001"})
    with pytest.raises(ReadError, match="2 runs"):
        reconcile([_record(0), other], [])


def test_interrupted_records_need_no_journal_entry() -> None:
    """After Ctrl-C, offers interrupted before reaching the router still reconcile."""
    records = [
        _record(0),
        _record(1, "interrupted", sent=False, error="interrupted before sending"),
        _record(2, "interrupted", error="interrupted while in flight"),
        _record(3, "interrupted"),
    ]
    journal = [_entry(f"{RUN}-000000"), _entry(f"{RUN}-000003", "client_disconnected")]
    result = reconcile(records, journal)
    assert result.ok, result.problems
    assert result.matched == 2 and result.counts["interrupted"] == 3
