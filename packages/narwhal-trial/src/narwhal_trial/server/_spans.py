"""Each vLLM ``llm_request`` span matched to its client record by request id.

vLLM names a completion's span ``cmpl-<X-Request-Id>-<prompt index>`` (0.32); other versions and
routers may drop the prefix or the suffix. A span's id, less a leading ``cmpl-``, matches the
client id it equals or that it starts with followed by ``-``: every measured id of a run has the
same length (``<run id>-<6 digits>``), so no id is a prefix of another. The warm-up's spans are
counted apart. A request with several spans was split: the spans of ``prefill`` engines (by the
fleet's roles; without roles, every span but the one that started last) are its prefill half,
and its server TTFT is their e2e plus the serving span's TTFT (docs/design.md §14).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import orjson

from narwhal_trial._stats import distribution
from narwhal_trial.documents._records import RequestRecord
from narwhal_trial.documents._server import ServerTiming, SpanView
from narwhal_trial.server._otlp import SpanLine

TTFT = "gen_ai.latency.time_to_first_token"
E2E = "gen_ai.latency.e2e"
QUEUE = "gen_ai.latency.time_in_queue"
PREFILL = "gen_ai.latency.time_in_model_prefill"
DECODE = "gen_ai.latency.time_in_model_decode"
REQUEST_ID = "gen_ai.request.id"
LISTED = 20


@dataclass(slots=True)
class SpanJoin:
    """Spans by the client id they belong to, and those that belong to none."""

    by_id: dict[str, list[SpanLine]] = field(default_factory=dict)
    warmup: int = 0
    foreign: list[str] = field(default_factory=list)


def read_spans(path: Path) -> list[SpanLine]:
    """Every complete line of the receiver's spans file (none when it does not exist)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    out: list[SpanLine] = []
    for line in data.split(b"\n"):
        if line.strip():
            try:
                doc = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue  # a line the receiver is still writing
            if isinstance(doc, dict):
                out.append(cast(SpanLine, doc))  # the receiver's own lines
    return out


def span_key(span: SpanLine) -> str:
    """The span's request id without vLLM's ``cmpl-`` prefix."""
    attrs = span.get("attributes") or {}
    return str(attrs.get(REQUEST_ID, "")).removeprefix("cmpl-")


def join(spans: Sequence[SpanLine], ids: Sequence[str], warmup_id: str) -> SpanJoin:
    """Group ``spans`` by the client ids in ``ids``."""
    out = SpanJoin()
    known = set(ids)
    width = len(ids[0]) if ids else 0
    for span in spans:
        key = span_key(span)
        if key == warmup_id or key.startswith(warmup_id + "-"):
            out.warmup += 1
            continue
        head = key[:width]
        if head in known and (len(key) == width or key[width] == "-"):
            out.by_id.setdefault(head, []).append(span)
        else:
            out.foreign.append(key)
    return out


def serving(span: SpanLine, roles: Mapping[str, str | None], output_tokens: int) -> bool:
    """Is this the span of the engine that streamed the request (not a split request's prefill
    half)? By the fleet's role; for an engine of unknown role, by its output token count."""
    role = roles.get(str(span.get("engine")))
    if role is not None:
        return role != "prefill"
    tokens = (span.get("attributes") or {}).get("gen_ai.usage.completion_tokens")
    return not isinstance(tokens, int) or tokens == output_tokens


async def wait_for_spans(
    path: Path,
    wanted: set[str],
    warmup_id: str,
    timeout_s: float,
    *,
    roles: Mapping[str, str | None],
    output_tokens: int | Mapping[str, int],
) -> float:
    """Wait until every id in ``wanted`` has its serving span (a split request's prefill half
    alone is not enough), or ``timeout_s``; the seconds waited. ``output_tokens``: every
    request's, or each id's (a scheduled workload)."""
    start = time.monotonic()
    ids = sorted(wanted)
    while wanted:
        by_id = join(read_spans(path), ids, warmup_id).by_id
        done = {
            i
            for i, spans in by_id.items()
            if any(
                serving(
                    s, roles, output_tokens if isinstance(output_tokens, int) else output_tokens[i]
                )
                for s in spans
            )
        }
        if wanted <= done or time.monotonic() - start >= timeout_s:
            break
        await asyncio.sleep(0.25)
    return time.monotonic() - start


def _num(span: SpanLine, key: str) -> float | None:
    value = (span.get("attributes") or {}).get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _sum(values: Sequence[float | None]) -> float | None:
    return None if any(v is None for v in values) else sum(v for v in values if v is not None)


def timing(
    record: RequestRecord, spans: Sequence[SpanLine], roles: Mapping[str, str | None]
) -> ServerTiming | None:
    """The record's server timings from its spans (None when no TTFT can be composed)."""
    if record.ttft_s is None or not spans:
        return None
    ordered = sorted(spans, key=lambda s: int(s.get("start_ns") or 0))
    prefill = [s for s in ordered if roles.get(str(s.get("engine"))) == "prefill"]
    serving = [s for s in ordered if s not in prefill]
    if not serving:
        return None
    if not any(roles.get(str(s.get("engine"))) for s in ordered):  # no roles: the last is serving
        prefill, serving = ordered[:-1], ordered[-1:]
    main = serving[-1]
    first = _num(main, TTFT)
    prefill_e2e = _sum([_num(s, E2E) for s in prefill])
    if first is None or prefill_e2e is None:
        return None
    ttft = first + prefill_e2e
    halves = [*prefill, main]
    e2e = _num(main, E2E)
    engine = main.get("engine")
    before = prefill[-1].get("engine") if prefill else None
    return ServerTiming(
        engine=str(engine) if engine is not None else None,
        prefill_engine=str(before) if before is not None else None,
        ttft_s=ttft,
        queue_s=_sum([_num(s, QUEUE) for s in halves]),
        prefill_s=_sum([_num(s, PREFILL) for s in halves]),
        decode_s=_num(main, DECODE),
        e2e_s=None if e2e is None else e2e + prefill_e2e,
        client_added_ttft_s=record.ttft_s - ttft,
        spans=len(spans),
    )


def attach(
    records: Sequence[RequestRecord], joined: SpanJoin, roles: Mapping[str, str | None]
) -> tuple[list[RequestRecord], SpanView]:
    """The records with their ``server`` timings, and the summary's span view."""
    out: list[RequestRecord] = []
    client_only: list[str] = []
    added: list[float] = []
    by_engine: dict[str, int] = {}
    completed = matched = 0
    for record in records:
        if record.status != "completed":
            out.append(record)
            continue
        completed += 1
        found = timing(record, joined.by_id.get(record.request_id, []), roles)
        if found is None:
            client_only.append(record.request_id)
            out.append(record)
            continue
        matched += 1
        added.append(found.client_added_ttft_s)
        engine = found.engine or "unknown"
        by_engine[engine] = by_engine.get(engine, 0) + 1
        out.append(record.model_copy(update={"server": found}))
    stats = distribution(added)
    stats["min"] = min(added) if added else None
    view = SpanView(
        client_completed=completed,
        matched=matched,
        client_only=len(client_only),
        client_only_ids=client_only[:LISTED],
        server_only=len(joined.foreign),
        server_only_ids=joined.foreign[:LISTED],
        warmup_spans=joined.warmup,
        added_ttft_s=stats,
        negative=sum(1 for a in added if a < 0),
        by_engine=dict(sorted(by_engine.items())),
    )
    return out, view
