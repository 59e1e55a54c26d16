"""Client fidelity benchmark of ``narwhal-trial run`` (``make bench``; not part of ``make test``).

Method. ``bench/trial_stamping_server.py`` (a minimal vLLM-shaped streaming server, separate
process) stamps on CLOCK_MONOTONIC when each request's first byte arrived and when it handed each
content chunk to its socket. The real client (``tools/measurement/load_trial.py run``, a
subprocess, exactly as the runbook runs it) records its own send and chunk arrival times on the
same clock (``time.perf_counter_ns``). Per request:

- added TTFT = client TTFT (first chunk read - send) - server TTFT (first chunk written - arrival)
- added TPOT = client TPOT - server TPOT, both (last - first chunk) / (tokens - 1)

Scenarios, with the runbook's 8,192-in / 128-out workload:

1. 64 concurrent streams: the rate that keeps about 64 requests in flight (cap raised to 96 so the
   cap itself never triggers).
2. Rate search: the in-flight cap lifted, rates climbing ``RATE_LADDER`` until the client cannot
   keep every offer within 50 ms of its due time (``client_schedule_valid`` false) or a request
   fails; the highest valid rate is reported with its errors.

CPU per request is the client's user+system CPU over the measured phase divided by the requests
sent (``summary.json``); it includes pacing, the loop-lag monitor and record writing.

Run: ``.venv/bin/python bench/trial_fidelity.py [--json FILE]`` (about two minutes).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from narwhal_trial import Sampling, SeedPrompt, Workload, workload_bytes
from narwhal_trial._stats import distribution

REPO = Path(__file__).resolve().parents[1]
LAUNCHER = REPO / "tools" / "measurement" / "load_trial.py"
SERVER = REPO / "bench" / "trial_stamping_server.py"
TTFT_S, TPOT_S, TOKENS, INPUT = 0.1, 0.02, 128, 8192
RATE_LADDER = (4.0, 8.0, 12.0, 16.0, 20.0, 24.0, 32.0, 40.0, 48.0, 64.0, 80.0, 96.0, 128.0)


def stamp_workload(folder: Path, input_tokens: int = INPUT, output_tokens: int = TOKENS) -> Path:
    """``folder/workload.json``: the stamping server's model, a fixed pool, these lengths."""
    work = Workload(
        model="stamp",
        max_model_len=65536,
        engine_version=None,
        pool=list(range(1000, 1032)),
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        seed=1729,
        sampling=Sampling(min_tokens=output_tokens, max_tokens=output_tokens),
        seed_prompt=SeedPrompt(
            name="bench", sha256="0" * 64, completion_tokens=32, token_ids_source="return_token_ids"
        ),
        created="2026-11-30T00:00:00+00:00",
    )
    path = folder / "workload.json"
    path.write_bytes(workload_bytes(work))
    return path


def _start_server() -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, str(SERVER), "--ttft", str(TTFT_S), "--tpot", str(TPOT_S)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    port = proc.stdout.readline().strip()
    return proc, f"http://127.0.0.1:{port}"


def _trial(base: str, workload: Path, out: Path, rate: float, requests: int, cap: int) -> int:
    cmd = [
        sys.executable,
        str(LAUNCHER),
        "run",
        "--base",
        base,
        "--workload",
        str(workload),
        "--rate",
        f"{rate:g}",
        "--requests",
        str(requests),
        "--ttft",
        "2",
        "--tpot",
        "0.0333",
        "--attainment",
        "0.95",
        "--out",
        str(out),
        "--max-in-flight",
        str(cap),
    ]
    return subprocess.run(cmd, capture_output=True, text=True, check=False).returncode


def _analyse(base: str, out: Path) -> dict[str, Any]:
    with urllib.request.urlopen(f"{base}/_stamps", timeout=30) as resp:
        stamps = json.loads(resp.read())
    summary = json.loads((out / "summary.json").read_text())
    records = [json.loads(x) for x in (out / "requests.jsonl").read_text().splitlines()]
    ttft_err: list[float] = []
    tpot_err: list[float] = []
    for rec in records:  # durations on each side: no clock offset enters the comparison
        s = stamps.get(rec["request_id"])
        if rec["status"] != "completed" or s is None or len(s["chunk_ns"]) != TOKENS:
            continue
        chunks = s["chunk_ns"]
        server_ttft = (chunks[0] - s["arrived_ns"]) / 1e9
        server_tpot = (chunks[-1] - chunks[0]) / (TOKENS - 1) / 1e9
        ttft_err.append(rec["ttft_s"] - server_ttft)
        tpot_err.append(rec["tpot_s"] - server_tpot)

    def pct(values: list[float]) -> dict[str, float | int | None]:
        dist = distribution([v * 1e3 for v in values])
        return {f"{k}_ms": dist[k] for k in ("p50", "p99", "max")}

    client = summary["client"]
    return {
        "rate": summary["offered_rate"],
        "requests": summary["requests"],
        "compared": len(ttft_err),
        "completed": summary["counts"]["completed"],
        "client_schedule_valid": summary["client_schedule_valid"],
        "max_in_flight": summary["max_in_flight"],
        "max_lag_ms": (summary["max_lag_s"] or 0) * 1e3,
        "scheduling_lag_p99_ms": (client["scheduling_lag_s"]["p99"] or 0) * 1e3,
        "event_loop_lag_p99_ms": (client["event_loop_lag_s"]["p99"] or 0) * 1e3,
        "added_ttft": pct(ttft_err),
        "added_tpot": pct(tpot_err),
        "cpu_per_request_ms": (client["cpu_per_sent_request_s"] or 0) * 1e3,
        "achieved_rate": summary["achieved_rate"],
    }


def _scenario(
    folder: Path, workload: Path, name: str, rate: float, requests: int, cap: int
) -> dict[str, Any]:
    server, base = _start_server()
    try:
        out = folder / name
        code = _trial(base, workload, out, rate, requests, cap)
        result = _analyse(base, out)
        result["exit_code"] = code
        result["load_average_1m"] = os.getloadavg()[0]
        return result
    finally:
        server.terminate()
        server.wait(timeout=10)


def main() -> int:
    """Run both scenarios and print (and optionally save) the figures."""
    parser = argparse.ArgumentParser(description="narwhal-trial client fidelity benchmark")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--seconds", type=float, default=10.0, help="offer window per scenario")
    args = parser.parse_args()
    duration = TTFT_S + (TOKENS - 1) * TPOT_S
    machine = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "processor": platform.processor() or platform.machine(),
    }
    results: dict[str, Any] = {
        "machine": machine,
        "server": {
            "ttft_s": TTFT_S,
            "tpot_s": TPOT_S,
            "output_tokens": TOKENS,
            "input_tokens": INPUT,
        },
    }
    with tempfile.TemporaryDirectory(prefix="trial-bench-") as tmp:
        folder = Path(tmp)
        workload = stamp_workload(folder)
        rate64 = 64 / duration
        print(f"scenario 1: 64 concurrent streams ({rate64:.1f} requests/s)", flush=True)
        results["concurrency_64"] = _scenario(
            folder, workload, "c64", rate64, int(rate64 * args.seconds), 96
        )
        print(json.dumps(results["concurrency_64"], indent=1), flush=True)
        search: list[dict[str, Any]] = []
        for rate in RATE_LADDER:
            print(f"scenario 2: rate {rate:g}/s", flush=True)
            started = time.monotonic()
            res = _scenario(folder, workload, f"r{rate:g}", rate, int(rate * args.seconds), 100000)
            res["wall_s"] = time.monotonic() - started
            print(json.dumps(res, indent=1), flush=True)
            search.append(res)
            if not res["client_schedule_valid"] or res["completed"] != res["requests"]:
                break
        valid = [
            r for r in search if r["client_schedule_valid"] and r["completed"] == r["requests"]
        ]
        results["rate_search"] = search
        results["highest_valid_rate"] = valid[-1] if valid else None
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
