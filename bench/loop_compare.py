"""asyncio's event loop against uvloop's under ``narwhal-trial run`` (``make bench``).

Method. ``bench/trial_stamping_server.py`` (its own process, pinned to the last CPU) stamps when
each request arrived and when it wrote each chunk; the real client (``load_trial.py run --loop
L``, a subprocess pinned to CPU 0) records its own times on the same clock, so the client's added
TTFT is its TTFT minus the server's. Both loops run the same workload (8,192 prompt tokens, short
outputs so the server keeps up at high rates) at each rate, alternating asyncio and uvloop, each
pair repeated ``--repeats`` times. Per run: the client's CPU per sent request, whether the
schedule stayed valid (every offer within 50 ms of its due time), the worst lag and the added
TTFT p50/p99. The figures and the choice of ``run``'s default loop they led to (asyncio's: uvloop
was not faster here) are in docs/benchmarks.md.

Run: ``.venv/bin/python bench/loop_compare.py [--rates 250,500,1000] [--repeats 3] [--json F]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.trial_fidelity import stamp_workload  # noqa: E402 - after the path

from narwhal_trial._stats import distribution  # noqa: E402 - after the path

LAUNCHER = REPO / "tools" / "measurement" / "load_trial.py"
SERVER = REPO / "bench" / "trial_stamping_server.py"
INPUT, TOKENS, TTFT_S, TPOT_S = 8192, 8, 0.05, 0.01
LOOPS = ("asyncio", "uvloop")


def _pinned(cpu: int) -> list[str]:
    """``taskset -c CPU`` where there is more than one CPU and taskset exists."""
    count = os.cpu_count() or 1
    has = subprocess.run(["which", "taskset"], capture_output=True, check=False).returncode == 0
    return ["taskset", "-c", str(cpu % count)] if count > 1 and has else []


def _one(folder: Path, workload: Path, loop: str, rate: float, requests: int) -> dict[str, Any]:
    cpus = os.cpu_count() or 1
    server = subprocess.Popen(
        [*_pinned(cpus - 1), sys.executable, str(SERVER), "--ttft", str(TTFT_S),
         "--tpot", str(TPOT_S)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert server.stdout is not None
        base = f"http://127.0.0.1:{server.stdout.readline().strip()}"
        out = folder / f"{loop}-{rate:g}-{len(list(folder.iterdir()))}"
        argv = [*_pinned(0), sys.executable, str(LAUNCHER), "run", "--base", base,
                "--workload", str(workload), "--rate", f"{rate:g}", "--requests", str(requests),
                "--ttft", "2", "--tpot", "0.0333", "--attainment", "0.95", "--out", str(out),
                "--max-in-flight", "4096", "--loop", loop]  # fmt: skip
        code = subprocess.run(argv, capture_output=True, text=True, check=False).returncode
        with urllib.request.urlopen(f"{base}/_stamps", timeout=60) as resp:
            stamps = json.loads(resp.read())
    finally:
        server.terminate()
        server.wait(timeout=10)
    summary = json.loads((out / "summary.json").read_text())
    manifest = json.loads((out / "manifest.json").read_text())
    added: list[float] = []
    for line in (out / "requests.jsonl").read_text().splitlines():
        rec = json.loads(line)
        s = stamps.get(rec["request_id"])
        if rec["status"] == "completed" and s is not None and s["chunk_ns"]:
            added.append(rec["ttft_s"] - (s["chunk_ns"][0] - s["arrived_ns"]) / 1e9)
    dist = distribution([v * 1e3 for v in added])
    return {
        "loop": manifest["event_loop"],
        "rate": rate,
        "requests": requests,
        "exit_code": code,
        "valid": summary["client_schedule_valid"],
        "sent": summary["sent"],
        "completed": summary["counts"]["completed"],
        "max_lag_ms": round((summary["max_lag_s"] or 0) * 1e3, 2),
        "cpu_per_request_ms": round((summary["client"]["cpu_per_sent_request_s"] or 0) * 1e3, 3),
        "lag_p99_ms": round((summary["client"]["scheduling_lag_s"]["p99"] or 0) * 1e3, 3),
        "added_ttft_p50_ms": round(dist["p50"] or 0, 3),
        "added_ttft_p99_ms": round(dist["p99"] or 0, 3),
        "load_1m": round(os.getloadavg()[0], 2),
    }


def main() -> int:
    """Run every (rate, loop) pair ``--repeats`` times; print the runs and the medians."""
    parser = argparse.ArgumentParser(description="asyncio against uvloop under the trial client")
    parser.add_argument("--rates", default="250,500,1000", help="offers per second, comma list")
    parser.add_argument("--seconds", type=float, default=6.0, help="offer window per run")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    rates = [float(r) for r in args.rates.split(",")]
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="loop-bench-") as tmp:
        folder = Path(tmp) / "runs"
        folder.mkdir()
        workload = stamp_workload(Path(tmp), INPUT, TOKENS)
        for rate in rates:
            for _ in range(args.repeats):
                for loop in LOOPS:
                    run = _one(folder, workload, loop, rate, int(rate * args.seconds))
                    print(json.dumps(run), flush=True)
                    runs.append(run)
    medians = []
    for rate in rates:
        for loop in LOOPS:
            mine = [r for r in runs if r["rate"] == rate and r["loop"] == loop]
            medians.append({
                "rate": rate, "loop": loop,
                "valid": f"{sum(r['valid'] for r in mine)}/{len(mine)}",
                "cpu_per_request_ms": statistics.median(r["cpu_per_request_ms"] for r in mine),
                "max_lag_ms": statistics.median(r["max_lag_ms"] for r in mine),
                "lag_p99_ms": statistics.median(r["lag_p99_ms"] for r in mine),
                "added_ttft_p99_ms": statistics.median(r["added_ttft_p99_ms"] for r in mine),
            })  # fmt: skip
    print("\nmedians (rate, loop, valid runs, CPU/request, lag p99, max lag, added TTFT p99):")
    for m in medians:
        print(f"  {m['rate']:>6g}/s {m['loop']:<8} {m['valid']:>4} "
              f"{m['cpu_per_request_ms']:.3f} ms {m['lag_p99_ms']:.2f} ms "
              f"{m['max_lag_ms']:.1f} ms {m['added_ttft_p99_ms']:.2f} ms")  # fmt: skip
    machine = {"python": platform.python_version(), "platform": platform.platform(),
               "cpus": os.cpu_count()}  # fmt: skip
    if args.json is not None:
        args.json.write_text(json.dumps({"machine": machine, "runs": runs, "medians": medians}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
