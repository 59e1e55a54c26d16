"""What the counterpart's stamps and a client's own report say about one run.

Definitions:

* **arrival lag**: the server-observed arrival of the i-th measured request (sorted) minus the
  ideal constant schedule ``t0 + i / rate``, with t0 the earliest ``arrival_i - i / rate`` (so the
  best-placed request has lag 0 and none is negative; aligning to the first arrival instead made
  every lag negative whenever request 0 alone was a millisecond late). When the client
  names each request's sequence number (narwhal-trial does; it may record offers as misses and
  never send them), i is that number instead of the arrival rank.
* **server TTFT**: first chunk's send stamp minus arrival; **server TPOT**: (last chunk - first
  chunk) / (chunks - 1). Each token is its own chunk.
* **added TTFT / TPOT** at percentile q: the client's reported q-th percentile minus the server's
  q-th percentile over the same run (compared at the same percentile, not per request).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from narwhal_trial._stats import distribution


@dataclass(frozen=True, slots=True)
class ServerStamp:
    """One completion as the counterpart stamped it (monotonic nanoseconds)."""

    request_id: str
    arrival_ns: int
    body_ns: int
    chunk_ns: tuple[int, ...]
    stream: bool
    max_tokens: int
    completed: bool

    @property
    def ttft_s(self) -> float | None:
        """First chunk's send minus arrival, seconds."""
        return (self.chunk_ns[0] - self.arrival_ns) / 1e9 if self.chunk_ns else None

    @property
    def tpot_s(self) -> float | None:
        """(last - first chunk) / (chunks - 1), seconds."""
        if len(self.chunk_ns) < 2:
            return None
        return (self.chunk_ns[-1] - self.chunk_ns[0]) / (len(self.chunk_ns) - 1) / 1e9


def load_stamps(path: Path) -> list[ServerStamp]:
    """Read the counterpart's JSON-lines stamp file."""
    stamps: list[ServerStamp] = []
    with path.open("rb") as fh:
        for line in fh:
            if not line.strip():
                continue
            doc: dict[str, Any] = json.loads(line)
            stamps.append(
                ServerStamp(
                    request_id=str(doc["request_id"]),
                    arrival_ns=int(doc["arrival_ns"]),
                    body_ns=int(doc.get("body_ns") or doc["arrival_ns"]),
                    chunk_ns=tuple(int(t) for t in doc["chunk_ns"]),
                    stream=bool(doc["stream"]),
                    max_tokens=int(doc["max_tokens"]),
                    completed=bool(doc["completed"]),
                )
            )
    return stamps


def measured(
    stamps: Iterable[ServerStamp], output_tokens: int, ids: set[str] | None
) -> list[ServerStamp]:
    """The streaming requests of the measured phase: those with ``ids`` when the client names
    them, else every streaming request of the row's output length."""
    chosen = [s for s in stamps if s.stream and s.max_tokens == output_tokens]
    if ids is not None:
        chosen = [s for s in chosen if s.request_id in ids]
    return sorted(chosen, key=lambda s: s.arrival_ns)


def arrival_lags_s(
    stamps: Sequence[ServerStamp], rate: float, sequence: dict[str, int] | None = None
) -> list[float]:
    """Each measured arrival minus the ideal constant schedule, aligned so the smallest lag is 0.

    Request i is the i-th arrival, or the client's own sequence number when ``sequence`` names
    every request.
    """
    ordered = sorted(stamps, key=lambda s: s.arrival_ns)
    if not ordered:
        return []
    if sequence is not None and all(s.request_id in sequence for s in ordered):
        slots = [sequence[s.request_id] for s in ordered]
    else:
        slots = list(range(len(ordered)))
    t0 = min(s.arrival_ns / 1e9 - n / rate for s, n in zip(ordered, slots, strict=True))
    return [s.arrival_ns / 1e9 - t0 - n / rate for s, n in zip(ordered, slots, strict=True)]


def achieved_rate(stamps: Sequence[ServerStamp]) -> float | None:
    """Arrivals per second between the first and the last measured arrival."""
    arrivals = sorted(s.arrival_ns for s in stamps)
    if len(arrivals) < 2 or arrivals[-1] <= arrivals[0]:
        return None
    return (len(arrivals) - 1) / ((arrivals[-1] - arrivals[0]) / 1e9)


@dataclass(frozen=True, slots=True)
class ClientReport:
    """What a client reported per request (seconds) and anything of its own worth showing."""

    ttft_s: list[float]
    tpot_s: list[float]
    request_ids: set[str] | None
    sequence: dict[str, int] | None = None
    schedule_valid: bool | None = None
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class RowResult:
    """One client on one row: the figures of the table, milliseconds unless named otherwise."""

    client: str
    row: str
    requests: int
    measured: int
    cpu_s: float
    cpu_per_request_ms: float
    achieved_rate: float | None
    lag_ms: dict[str, float | None]
    server_ttft_ms: dict[str, float | None]
    server_tpot_ms: dict[str, float | None]
    body_wait_ms: dict[str, float | None]
    client_ttft_ms: dict[str, float | None]
    client_tpot_ms: dict[str, float | None]
    added_ttft_ms: dict[str, float | None]
    added_tpot_ms: dict[str, float | None]
    schedule_valid: bool | None
    exit_code: int
    wall_s: float
    server_cpu_s: float | None
    notes: tuple[str, ...]


def _ms(values: Sequence[float], keys: Sequence[str] = ("p50", "p99")) -> dict[str, float | None]:
    """``keys`` of the trial's own ``distribution`` of ``values`` (seconds), in milliseconds."""
    dist = distribution(values)
    return {k: None if (v := dist[k]) is None else v * 1e3 for k in keys}


def _diff(
    client: dict[str, float | None], server: dict[str, float | None]
) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for key, s in server.items():
        c = client.get(key)
        out[key] = c - s if c is not None and s is not None else None
    return out


def evaluate(
    *,
    client: str,
    row_name: str,
    rate: float,
    requests: int,
    output_tokens: int,
    stamps: Sequence[ServerStamp],
    report: ClientReport,
    cpu_s: float,
    exit_code: int,
    wall_s: float,
    server_cpu_s: float | None = None,
) -> RowResult:
    """Combine the server's stamps and the client's report into the row's figures."""
    chosen = measured(stamps, output_tokens, report.request_ids)
    lags = arrival_lags_s(chosen, rate, report.sequence)
    server_ttft = [v for s in chosen if s.completed and (v := s.ttft_s) is not None]
    server_tpot = [v for s in chosen if s.completed and (v := s.tpot_s) is not None]
    s_ttft, s_tpot = _ms(server_ttft), _ms(server_tpot)
    c_ttft, c_tpot = _ms(report.ttft_s), _ms(report.tpot_s)
    notes = list(report.notes)
    if len(chosen) != requests:
        notes.append(f"server saw {len(chosen)} of {requests} measured requests")
    return RowResult(
        client=client,
        row=row_name,
        requests=requests,
        measured=len(chosen),
        cpu_s=cpu_s,
        cpu_per_request_ms=cpu_s / requests * 1e3,
        achieved_rate=achieved_rate(chosen),
        lag_ms=_ms(lags, ("p50", "p99", "max")),
        server_ttft_ms=s_ttft,
        server_tpot_ms=s_tpot,
        body_wait_ms=_ms([(s.body_ns - s.arrival_ns) / 1e9 for s in chosen]),
        client_ttft_ms=c_ttft,
        client_tpot_ms=c_tpot,
        added_ttft_ms=_diff(c_ttft, s_ttft),
        added_tpot_ms=_diff(c_tpot, s_tpot),
        schedule_valid=report.schedule_valid,
        exit_code=exit_code,
        wall_s=wall_s,
        server_cpu_s=server_cpu_s,
        notes=tuple(notes),
    )
