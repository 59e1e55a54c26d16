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


def _timed(rid: str, arrival: float, end: float, status: str = "ok") -> dict[str, Any]:
    return _entry(rid, status, arrival=arrival, end=end)


T0 = 1_800_000_000.0  # journal time (unix seconds)


def _timed_run() -> tuple[list[RequestRecord], list[dict[str, Any]]]:
    """Two offers that reached the router at T0 + 10 and T0 + 12 and ended at T0 + 11.5 and
    T0 + 14 (the window: T0 + 10 to T0 + 14), the warm-up at T0 + 5."""
    records = [_record(0), _record(1)]
    journal = [
        _timed(f"{RUN}-warmup", T0 + 5, T0 + 6),
        _timed(f"{RUN}-000000", T0 + 10, T0 + 11.5),
        _timed(f"{RUN}-000001", T0 + 12, T0 + 14),
    ]
    return records, journal


@pytest.mark.parametrize(
    ("arrival", "end"),
    [(T0 + 11, T0 + 11.2), (T0 + 9, T0 + 10.5), (T0 + 13.9, T0 + 20), (T0 + 1, T0 + 30)],
    ids=["inside", "ends-inside", "starts-inside", "spans"],
)
def test_a_foreign_request_inside_the_window_means_no_reservation(
    arrival: float, end: float
) -> None:
    """A foreign entry overlapping the trial's window (journal time, the run's first arrival to
    its last end) makes the run unreserved, whatever the records say; the error names how many
    and when."""
    records, journal = _timed_run()
    journal.append(_timed("someone-else-1", arrival, end))
    result = reconcile(records, journal)
    assert result.ok and not result.reserved
    assert result.window == (T0 + 10, T0 + 14)
    assert result.overlapping == [("someone-else-1", arrival, end)]
    error = result.reservation_error()
    assert error is not None
    assert error.startswith(f"1 foreign journal entry (not of run {RUN}) overlaps the trial's")
    assert "2027-01-15T08:00:10.000+00:00 to 2027-01-15T08:00:14.000+00:00" in error
    assert "(someone-else-1): the router was not reserved for the trial" in error
    assert result.to_dict()["reserved"] is False


def test_foreign_requests_outside_the_window_are_only_counted() -> None:
    """Before the first offer (the warm-up's time included) and after the last stream ended:
    counted as foreign, and the router counts as reserved."""
    records, journal = _timed_run()
    journal += [
        _timed("prepare-seed", T0 + 1, T0 + 2),
        _timed("during-warmup", T0 + 5.5, T0 + 9.99),
        _timed("after", T0 + 14.01, T0 + 15),
        _entry("no-times"),  # a journal that gives no times is not judged
    ]
    result = reconcile(records, journal)
    assert result.ok and result.reserved and result.reservation_error() is None
    assert result.foreign_entries == 4 and result.overlapping == []


def test_many_foreign_requests_are_named_by_count_and_span() -> None:
    """Five overlapping foreign entries: the count, the earliest arrival, the latest end and the
    first three ids."""
    records, journal = _timed_run()
    journal += [_timed(f"other-{n}", T0 + 10 + n / 2, T0 + 11 + n) for n in range(5)]
    error = reconcile(records, journal).reservation_error()
    assert error is not None and error.startswith("5 foreign journal entries")
    assert "from 2027-01-15T08:00:10.000+00:00 to 2027-01-15T08:00:15.000+00:00" in error
    assert "(other-0, other-1, other-2, ...)" in error
