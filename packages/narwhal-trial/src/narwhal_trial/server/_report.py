"""After the run: ``server.json``, the records' span timings, and the summary's ``server``.

Runs once the event loop has ended and every record is written. With spans, ``requests.jsonl``
is rewritten atomically with each matched record's ``server`` timings (the lines as the run wrote
them otherwise, in the same order).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import orjson

from narwhal_trial._files import atomic_write, document_bytes
from narwhal_trial.documents._records import RequestRecord, Summary
from narwhal_trial.documents._server import ReceiverFacts, ServerDoc
from narwhal_trial.server._compare import compare
from narwhal_trial.server._spans import attach, join, read_spans
from narwhal_trial.server._watch import ServerWatch


@dataclass(frozen=True, slots=True)
class SpanInputs:
    """What the receiver left: its address, counts, spans file and how long the run waited."""

    address: str
    counts: dict[str, int]
    spans_path: Path
    waited_s: float


def write_server_view(
    *,
    out: Path,
    run_id: str,
    warmup_id: str,
    watch: ServerWatch,
    records: list[RequestRecord],
    summary: Summary,
    spans: SpanInputs | None,
) -> Summary:
    """Write ``server.json`` (and the records' timings with spans); the summary with ``server``."""
    pages = watch.pages()
    roles = watch.roles()
    span_view = None
    receiver = None
    if spans is not None:
        ids = sorted(r.request_id for r in records)
        joined = join(read_spans(spans.spans_path), ids, warmup_id)
        records, span_view = attach(records, joined, roles)
        receiver = ReceiverFacts(
            address=spans.address,
            exports=spans.counts.get("exports", 0),
            rejected=spans.counts.get("rejected", 0),
            spans=spans.counts.get("spans", 0),
            other_spans=spans.counts.get("other_spans", 0),
            waited_s=spans.waited_s,
        )
        lines = [orjson.dumps(r.model_dump(mode="json")) + b"\n" for r in records]
        atomic_write(out / "requests.jsonl", b"".join(lines))
    doc = ServerDoc(run_id=run_id, pages=pages, receiver=receiver)
    atomic_write(out / "server.json", document_bytes(doc.model_dump(mode="json")))
    view = compare(pages, records, span_view)
    return summary.model_copy(update={"server": view})
