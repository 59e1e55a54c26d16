"""``bench_clients.py --limit``: the highest rate narwhal-trial keeps its schedule at.

The shape is the r500 row's (512 in, 16 out, 5 ms per token) against the stamping counterpart,
client and server pinned as in the table. The rate climbs by ``step`` from ``start`` until a run
reports ``client_schedule_valid: false``, then the gap between the last valid and the first
invalid rate is halved ``refine`` times. Every probe is a fresh counterpart and a full
``load_trial.py run`` of ``seconds`` of offers; its figures come from the trial's own files and the
server's stamps. The in-flight cap is lifted (``--max-in-flight``) so the limit found is the
client's, not Little's law on the counterpart's latency (64 in flight x 85 ms per request binds
near 750 req/s).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import _narwhal
from ._one_run import run_one
from ._rows import TTFT_MS, Row


@dataclass(frozen=True, slots=True)
class Probe:
    """One run at one offered rate, from the trial's files and the server's stamps."""

    rate: float
    requests: int
    valid: bool
    misses: dict[str, int]
    sent: int
    sent_late: int
    """Sent records whose send stamp was later than ``--max-lag`` after their due time."""
    max_sent_lag_ms: float | None
    achieved_rate: float | None
    server_lag_p99_ms: float | None
    cpu_per_request_ms: float | None
    first_misses: list[dict[str, Any]]


def _probe(rate: float, seconds: float, max_in_flight: int, folder: Path) -> Probe:
    requests = max(1, round(rate * seconds))
    row = Row(f"limit-{rate:g}", rate, requests, 512, 16, TTFT_MS, 5.0)
    runner = functools.partial(_narwhal.run, extra=("--max-in-flight", str(max_in_flight)))
    result, _ = run_one("narwhal", runner, row, folder)
    run = folder / "run"
    summary: dict[str, Any] = json.loads((run / "summary.json").read_text())
    limit_s = json.loads((run / "manifest.json").read_text())["limits"]["max_lag_s"]
    records = [json.loads(line) for line in (run / "requests.jsonl").read_bytes().splitlines()]
    sent = [r for r in records if r["sent"]]
    misses = sorted(
        (r for r in records if r["status"] == "client_schedule_miss"), key=lambda r: r["sequence"]
    )
    own = (summary.get("client") or {}).get("cpu_per_sent_request_s")
    max_lag = summary.get("max_lag_s")
    return Probe(
        rate=rate,
        requests=requests,
        valid=bool(summary["client_schedule_valid"]),
        misses=dict(summary["schedule_misses"]),
        sent=len(sent),
        sent_late=sum(1 for r in sent if r["lag_s"] > limit_s),
        max_sent_lag_ms=None if max_lag is None else max_lag * 1e3,
        achieved_rate=result.achieved_rate,
        server_lag_p99_ms=result.lag_ms.get("p99"),
        cpu_per_request_ms=None if own is None else own * 1e3,
        first_misses=[
            {k: r[k] for k in ("sequence", "due_s", "lag_s", "miss_reason", "error")}
            for r in misses[:3]
        ],
    )


def study(
    out: Path, *, start: float, step: float, seconds: float, refine: int, max_in_flight: int
) -> tuple[list[Probe], float | None, float | None]:
    """Climb, then bisect; returns every probe, the highest valid and the lowest invalid rate."""
    probes: list[Probe] = []

    def probe(rate: float) -> Probe:
        print(f"[limit] {rate:g} req/s x {seconds:g} s ...", flush=True)
        got = _probe(rate, seconds, max_in_flight, out / f"rate-{rate:g}")
        probes.append(got)
        print(
            f"[limit] {rate:g} req/s: valid {got.valid}, misses {got.misses}, sent late "
            f"{got.sent_late}, in-run CPU/request {got.cpu_per_request_ms or 0:.2f} ms",
            flush=True,
        )
        return got

    good: float | None = None
    bad: float | None = None
    rate = start
    while bad is None and rate <= start + 40 * step:
        if probe(rate).valid:
            good = rate
            rate += step
        else:
            bad = rate
    low = good if good is not None else 0.0
    for _ in range(refine if bad is not None else 0):
        assert bad is not None
        mid = round((low + bad) / 2 / 10) * 10
        if mid <= low or mid >= bad:
            break
        if probe(mid).valid:
            low = good = mid
        else:
            bad = mid
    return probes, good, bad


def report(probes: list[Probe], good: float | None, bad: float | None, max_in_flight: int) -> str:
    """The probes as a Markdown table, the limit, and the first misses just beyond it."""
    lines = [
        f"Limit study: 512 in / 16 out, 5 ms per token, --max-in-flight {max_in_flight}, "
        "--max-lag 0.05 (the runbook's).",
        "",
        "| offered (req/s) | offers | client_schedule_valid | misses cap / lag | sent later than "
        "--max-lag | own max sent lag (ms) | achieved at server (req/s) | server arrival lag p99 "
        "(ms) | in-run CPU per request (ms) |",
        "| ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]

    def num(value: float | None, fmt: str = ".2f") -> str:
        return "-" if value is None else format(value, fmt)

    for p in sorted(probes, key=lambda p: p.rate):
        lines.append(
            f"| {p.rate:g} | {p.requests} | {str(p.valid).lower()} | "
            f"{p.misses.get('in_flight_cap', 0)} / {p.misses.get('lag', 0)} | {p.sent_late} | "
            f"{num(p.max_sent_lag_ms)} | {num(p.achieved_rate, '.1f')} | "
            f"{num(p.server_lag_p99_ms)} | {num(p.cpu_per_request_ms)} |"
        )
    lines.append("")
    lines.append(
        f"Highest valid rate: {'-' if good is None else f'{good:g}'} req/s; lowest invalid: "
        f"{'-' if bad is None else f'{bad:g}'} req/s."
    )
    beyond = next((p for p in probes if p.rate == bad), None)
    if beyond is not None:
        lines.append("")
        lines.append(f"First schedule misses at {bad:g} req/s (requests.jsonl):")
        lines.append("")
        lines.extend(f"- `{json.dumps(m)}`" for m in beyond.first_misses)
    return "\n".join(lines) + "\n"
