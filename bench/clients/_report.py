"""The Markdown tables and the machine description of a benchmark run."""

from __future__ import annotations

import os
import platform
from collections.abc import Sequence
from pathlib import Path

from ._measures import RowResult
from ._rows import Row


def machine() -> dict[str, str]:
    """nproc, the CPU model from /proc/cpuinfo, kernel and Python."""
    info: dict[str, str] = {}
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text(errors="replace").splitlines():
            key, _, value = line.partition(":")
            key = key.strip()
            if not key and info:
                break  # the first processor's block is enough
            info.setdefault(key, value.strip())
    model = info.get("model name", "unknown")
    if "cpu family" in info and "model" in info:
        model += f" (family {info['cpu family']}, model {info['model']}"
        model += f", {float(info['cpu MHz']):.0f} MHz)" if "cpu MHz" in info else ")"
    return {
        "nproc": str(len(os.sched_getaffinity(0))),
        "cpu_count": str(os.cpu_count()),
        "cpu_model": model,
        "kernel": platform.release(),
        "python": platform.python_version(),
    }


def _f(value: float | None, digits: int = 2) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def _pair(d: dict[str, float | None]) -> str:
    return f"{_f(d.get('p50'))} / {_f(d.get('p99'))}"


def _valid(value: bool | None) -> str:
    return "n/a" if value is None else ("true" if value else "**false**")


def table(rows: Sequence[Row], results: Sequence[RowResult], skipped: dict[str, str]) -> str:
    """The issue's table: one line per row and client."""
    head = (
        "| row | client | CPU per request (ms) | achieved (req/s) | arrival lag p50 / p99 / max"
        " (ms) | added TTFT p50 / p99 (ms) | added TPOT p50 / p99 (ms) |"
        " client_schedule_valid |\n| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |\n"
    )
    labels = {r.name: r.label for r in rows}
    lines = []
    for res in results:
        lag = res.lag_ms
        lines.append(
            f"| {labels.get(res.row, res.row)} | {res.client} | {_f(res.cpu_per_request_ms)} | "
            f"{_f(res.achieved_rate, 1)} | {_f(lag.get('p50'))} / {_f(lag.get('p99'))} / "
            f"{_f(lag.get('max'))} | {_pair(res.added_ttft_ms)} | {_pair(res.added_tpot_ms)} | "
            f"{_valid(res.schedule_valid)} |"
        )
    text = head + "\n".join(lines) + "\n"
    if skipped:
        text += "\n" + "\n".join(f"- skipped {k}: {v}" for k, v in skipped.items()) + "\n"
    return text


def detail(results: Sequence[RowResult]) -> str:
    """Server-stamped and client-reported percentiles behind the differences, and notes."""
    head = (
        "| row | client | measured | server TTFT p50 / p99 | client TTFT p50 / p99 |"
        " server TPOT p50 / p99 | client TPOT p50 / p99 | head-to-body p50 / p99 | client CPU s |"
        " server CPU s | wall s | exit | notes |\n"
        "| --- | --- |" + " ---: |" * 10 + " --- |\n"
    )
    lines = [
        f"| {r.row} | {r.client} | {r.measured}/{r.requests} | {_pair(r.server_ttft_ms)} | "
        f"{_pair(r.client_ttft_ms)} | {_pair(r.server_tpot_ms)} | {_pair(r.client_tpot_ms)} | "
        f"{_pair(r.body_wait_ms)} | "
        f"{_f(r.cpu_s)} | {_f(r.server_cpu_s)} | {_f(r.wall_s, 1)} | {r.exit_code} | "
        f"{'; '.join(r.notes)} |"
        for r in results
    ]
    return head + "\n".join(lines) + "\n"
