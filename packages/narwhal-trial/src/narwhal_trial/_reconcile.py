"""``reconcile``: each client record matched to exactly one router journal entry by request id.

The journal is the simulated router's (one JSON object per line: ``request_id``, ``engine``,
``arrival``, ``first_token``, ``end``, ``status`` in ``ok | error | cut | stream_error |
client_disconnected | no_engine``, ``http_status``, ``prompt_tokens``, ``completion_tokens``).

Only journal entries of this run count: their request id starts with the run id (the part of the
client ids before the sequence number). The run's warm-up entry is counted apart, entries of other
runs are reported as foreign and not judged. ``client_schedule_miss`` records were never sent: they
must not appear in the journal. Every other client record needs exactly one entry whose status
agrees with the client's (see ``AGREES``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from pydantic import ValidationError

from narwhal_trial._errors import ReadError
from narwhal_trial._files import read_regular
from narwhal_trial._records import RequestRecord

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
    foreign_entries: int = 0
    problems: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when nothing disagrees."""
        return not self.problems

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
            "foreign_entries": self.foreign_entries,
            "counts": self.counts,
            "problems": self.problems,
        }


def read_requests(path: Path) -> list[RequestRecord]:
    """Every line of a ``requests.jsonl``, validated."""
    records: list[RequestRecord] = []
    for number, line in enumerate(_lines(path), start=1):
        try:
            records.append(RequestRecord.model_validate_json(line))
        except ValidationError as exc:
            raise ReadError(
                f"{path}:{number}: not a request record: {exc.errors()[0]['msg']}"
            ) from exc
    return records


def read_journal(path: Path) -> list[dict[str, Any]]:
    """Every line of a router journal (objects with a string ``request_id``)."""
    entries: list[dict[str, Any]] = []
    for number, line in enumerate(_lines(path), start=1):
        try:
            doc = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise ReadError(f"{path}:{number}: not JSON: {exc}") from exc
        if not isinstance(doc, dict) or not isinstance(doc.get("request_id"), str):
            raise ReadError(f"{path}:{number}: a journal entry needs a string request_id")
        entries.append(doc)
    return entries


def _lines(path: Path) -> list[bytes]:
    try:
        data = read_regular(path)
    except OSError as exc:
        raise ReadError(f"cannot read {path}: {exc.strerror or exc}") from exc
    return [line for line in data.splitlines() if line.strip()]


def run_id_of(records: list[RequestRecord]) -> str:
    """The run id shared by every client record id (``<run id>-<sequence>``)."""
    ids = {r.request_id.rsplit("-", 1)[0] for r in records}
    if len(ids) != 1:
        raise ReadError(f"client records belong to {len(ids)} runs, expected one")
    return ids.pop()


def reconcile(records: list[RequestRecord], journal: list[dict[str, Any]]) -> Reconciliation:
    """Match client records to journal entries; every disagreement becomes a problem line."""
    if not records:
        raise ReadError("no client records to reconcile")
    run_id = run_id_of(records)
    result = Reconciliation(run_id=run_id, client_records=len(records))
    result.counts = dict(Counter(r.status for r in records))
    prefix = run_id + "-"
    mine: dict[str, list[dict[str, Any]]] = {}
    for entry in journal:
        rid = entry["request_id"]
        if rid == f"{run_id}-warmup":
            result.warmup_entries += 1
        elif rid.startswith(prefix):
            mine.setdefault(rid, []).append(entry)
        else:
            result.foreign_entries += 1
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


def _judge(record: RequestRecord, found: list[dict[str, Any]]) -> str | None:
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
