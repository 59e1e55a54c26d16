"""``reconcile``: each client record matched to exactly one router journal entry by request id.

The journal is the simulated router's (one JSON object per line: ``request_id``, ``engine``,
``arrival``, ``first_token``, ``end``, ``status`` in ``ok | error | cut | stream_error |
client_disconnected | no_engine``, ``http_status``, ``prompt_tokens``, ``completion_tokens``).

Only journal entries of this run count: their request id starts with the run id (the part of the
client ids before the sequence number). The run's warm-up entry and its request-field probes
(``<run id>-warmup-probe-<k>``, sent before the warm-up) are counted apart, entries of other
runs are reported as foreign and not judged. ``client_schedule_miss`` records were never sent: they
must not appear in the journal. Every other client record needs exactly one entry whose status
agrees with the client's (see ``AGREES``).

The runbook reserves the router for trial traffic. The trial's window is taken in the journal's own
time base, so no clock is mapped: from the earliest ``arrival`` of the run's entries (its first
offer reaching the router) to their latest ``end`` (its last stream's end), the warm-up left out. A
foreign entry whose ``[arrival, end]`` overlaps that window means the router was not reserved: the
``reserved`` verdict is false, which the command reports as a blocking error. Foreign entries
outside the window (the run's warm-up, earlier or later traffic) are only counted.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Required, TypedDict, cast

import orjson

from narwhal_trial._errors import ReadError
from narwhal_trial.documents._records import RequestRecord
from narwhal_trial.documents._runfolder import jsonl_lines

ANY = frozenset({"ok", "error", "cut", "stream_error", "client_disconnected", "no_engine"})
AGREES: dict[str, frozenset[str]] = {
    "completed": frozenset({"ok"}),
    "http_error": frozenset({"error", "no_engine"}),
    "stream_error": frozenset({"stream_error"}),
    "stream_cut": frozenset({"cut"}),
    "timeout": frozenset({"client_disconnected", "cut", "error", "stream_error"}),
    "connect_error": ANY - {"ok"},
    "protocol_error": ANY,
    "interrupted": ANY,
}
"""Journal statuses that agree with each client status. A client ``completed`` must also agree on
``completion_tokens`` and an ``http_error`` on ``http_status`` when the journal gives them."""

OPTIONAL = frozenset({"connect_error", "interrupted"})
"""Client statuses whose request may never have reached the router (an offer interrupted by Ctrl-C
may have been cancelled before it was sent, or before the router accepted it)."""


@dataclass(slots=True)
class Reconciliation:
    """The outcome; ``ok`` when every client record reconciles."""

    run_id: str
    client_records: int = 0
    matched: int = 0
    schedule_misses: int = 0
    warmup_entries: int = 0
    probe_entries: int = 0
    foreign_entries: int = 0
    problems: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    window: tuple[float, float] | None = None
    """the trial's window in the journal's time base (unix seconds): the earliest arrival of the
    run's entries to their latest end; None when the journal gives them no times"""
    overlapping: list[tuple[str, float, float]] = field(default_factory=list)
    """foreign entries inside the window: request id, arrival, end (journal time)"""

    @property
    def ok(self) -> bool:
        """True when nothing disagrees."""
        return not self.problems

    @property
    def reserved(self) -> bool:
        """True when no foreign request overlaps the trial's window (the router was reserved)."""
        return not self.overlapping

    def reservation_error(self) -> str | None:
        """The one-line blocking error when the router was not reserved, else None."""
        if self.reserved or self.window is None:
            return None
        first = min(arrival for _, arrival, _ in self.overlapping)
        last = max(end for _, _, end in self.overlapping)
        ids = ", ".join(rid for rid, _, _ in self.overlapping[:3])
        more = ", ..." if len(self.overlapping) > 3 else ""
        n = len(self.overlapping)
        return (
            f"{n} foreign journal entr{'y' if n == 1 else 'ies'} (not of run {self.run_id}) "
            f"overlap{'s' if n == 1 else ''} the trial's window {_utc(self.window[0])} to "
            f"{_utc(self.window[1])}, from {_utc(first)} to {_utc(last)} ({ids}{more}): the "
            "router was not reserved for the trial"
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON report."""
        return {
            "format": "narwhal.trial.reconciliation",
            "format_version": 1,
            "run_id": self.run_id,
            "ok": self.ok,
            "client_records": self.client_records,
            "matched": self.matched,
            "schedule_misses": self.schedule_misses,
            "warmup_entries": self.warmup_entries,
            "probe_entries": self.probe_entries,
            "foreign_entries": self.foreign_entries,
            "reserved": self.reserved,
            "window": None
            if self.window is None
            else {"start": self.window[0], "end": self.window[1]},
            "foreign_in_window": [
                {"request_id": rid, "arrival": arrival, "end": end}
                for rid, arrival, end in self.overlapping
            ],
            "counts": self.counts,
            "problems": self.problems,
        }


class JournalEntry(TypedDict, total=False):
    """One line of a router journal as ``reconcile`` reads it: only ``request_id`` is required;
    the rest is compared when the router wrote it (times in the journal's own seconds)."""

    request_id: Required[str]
    status: str
    completion_tokens: int
    http_status: int
    arrival: float
    end: float


def read_journal(path: Path) -> list[JournalEntry]:
    """Every line of a router journal (objects with a string ``request_id``)."""
    entries: list[JournalEntry] = []
    for number, line in enumerate(jsonl_lines(path), start=1):
        try:
            doc = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise ReadError(f"{path}:{number}: not JSON: {exc}") from exc
        if not isinstance(doc, dict) or not isinstance(doc.get("request_id"), str):
            raise ReadError(f"{path}:{number}: a journal entry needs a string request_id")
        entries.append(cast(JournalEntry, doc))
    return entries


def run_id_of(records: list[RequestRecord]) -> str:
    """The run id shared by every client record id (``<run id>-<sequence>``)."""
    ids = {r.request_id.rsplit("-", 1)[0] for r in records}
    if len(ids) != 1:
        raise ReadError(f"client records belong to {len(ids)} runs, expected one")
    return ids.pop()


def reconcile(records: list[RequestRecord], journal: list[JournalEntry]) -> Reconciliation:
    """Match client records to journal entries; every disagreement becomes a problem line."""
    if not records:
        raise ReadError("no client records to reconcile")
    run_id = run_id_of(records)
    result = Reconciliation(run_id=run_id, client_records=len(records))
    result.counts = dict(Counter(r.status for r in records))
    prefix = run_id + "-"
    mine: dict[str, list[JournalEntry]] = {}
    foreign: list[JournalEntry] = []
    for entry in journal:
        rid = entry["request_id"]
        if rid == f"{run_id}-warmup":
            result.warmup_entries += 1
        elif rid.startswith(f"{run_id}-warmup-probe-"):
            result.probe_entries += 1
        elif rid.startswith(prefix):
            mine.setdefault(rid, []).append(entry)
        else:
            foreign.append(entry)
    result.foreign_entries = len(foreign)
    result.window = _span([e for entries in mine.values() for e in entries])
    if result.window is not None:
        start, end = result.window
        for entry in foreign:
            times = _times(entry)
            if times is not None and times[0] <= end and times[1] >= start:
                result.overlapping.append((entry["request_id"], *times))
    seen = Counter(r.request_id for r in records)
    for rid, count in sorted(seen.items()):
        if count > 1:
            result.problems.append(f"{rid}: {count} client records (duplicated)")
    for record in records:
        found = mine.pop(record.request_id, [])
        problem = _judge(record, found)
        if record.status == "client_schedule_miss":
            result.schedule_misses += 1
        elif problem is None and found:  # not an optional record that never reached the router
            result.matched += 1
        if problem is not None:
            result.problems.append(f"{record.request_id}: {problem}")
    for rid, entries in sorted(mine.items()):
        result.problems.append(f"{rid}: {len(entries)} journal entr(ies) without a client record")
    return result


def _judge(record: RequestRecord, found: list[JournalEntry]) -> str | None:
    if record.status == "client_schedule_miss":
        return (
            None if not found else f"a schedule miss (never sent) is in the journal {len(found)}x"
        )
    if not found:
        if record.status in OPTIONAL:
            return None
        return f"{record.status} record has no journal entry (unmatched)"
    if len(found) > 1:
        return f"{len(found)} journal entries (duplicated)"
    entry = found[0]
    status = entry.get("status")
    if status not in AGREES[record.status]:
        return f"client says {record.status}, journal says {status}"
    if record.status == "completed":
        tokens = entry.get("completion_tokens")
        if tokens is not None and tokens != record.completion_tokens:
            return f"client counted {record.completion_tokens} output tokens, journal {tokens}"
    if record.status == "http_error":
        code = entry.get("http_status")
        if code is not None and code != record.http_status:
            return f"client got HTTP {record.http_status}, journal says {code}"
    return None


def _times(entry: JournalEntry) -> tuple[float, float] | None:
    """An entry's ``(arrival, end)`` in journal time (end: the arrival when it has none); None
    without a numeric arrival."""
    arrival, end = _time(entry.get("arrival")), _time(entry.get("end"))
    if arrival is None:
        return None
    return arrival, arrival if end is None else max(arrival, end)


def _time(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


def _span(entries: list[JournalEntry]) -> tuple[float, float] | None:
    """From the earliest arrival to the latest end of ``entries``; None when none has times."""
    times = [t for t in map(_times, entries) if t is not None]
    if not times:
        return None
    return min(a for a, _ in times), max(e for _, e in times)


def _utc(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds")
