"""``narwhal-trial`` at scale: ``prepare --trace`` of 100,000 requests, and ``run`` of a
10,000-request window at its real pace with the client on one core.

The bounds held to: ``prepare`` of a 100,000-request trace takes under 30 s and under 1 GiB RSS;
``run`` of a 10,000-request window at its real pace keeps a valid schedule on one core.

Method.

1. A seeded Mooncake JSONL trace of ``--rows`` rows is written to a temporary folder: gamma
   inter-arrival gaps at a mean ``RATE`` requests/s with coefficient of variation ``GAP_CV``
   (bursty: Poisson is 1), inputs lognormal (median 800, clipped to 64-4096 tokens), outputs
   lognormal (median 16, clipped to 1-64), and ``hash_ids`` of 512-token blocks that are chained
   (an id always follows the same id, so equal ids are an equal prefix): each prompt starts with
   either one of 64 shared "system prompts" of 1-4 blocks (Zipf-like popularity) or, for 30 % of
   the requests, the full blocks of one of the 1,000 requests before it (a follow-up turn),
   completed with fresh ids.
2. A simulated fleet (``narwhal-sim``, ``tiny`` preset, ``--engines`` mixed engines behind its
   router, ``kv_cache_tokens`` 200,000 each) is started pinned to the last core.
3. ``prepare --trace`` of the whole trace runs as a subprocess (``tools/measurement/load_trial.py``,
   as the runbook runs it) pinned to core 0; its wall time (spawn to exit, interpreter start and
   imports included), peak RSS and CPU come from ``os.wait4`` (the child's own rusage), and the
   workload file's size from the file.
4. ``prepare --trace --limit REQUESTS`` takes the trace's first ``--requests`` requests
   (about 200 s at 50 requests/s), then ``run --speedup 1`` replays them at their real pace,
   the client pinned to core 0 (``taskset -c 0``, else ``sched_setaffinity``), ``--max-in-flight
   512``. Reported from its ``summary.json``: ``client_schedule_valid``, the schedule misses,
   the worst send lag, the scheduling lag p99, the densest second (its requests and its worst
   lag), the client's CPU over the measured phase; and the simulator's CPU over the run (from
   ``/proc``), to show it kept up.

Run: ``.venv/bin/python bench/trace_scale.py [--rows 100000] [--requests 10000] [--json FILE]``
(about five minutes; ``--quick``: 20,000 rows, a 1,000-request run, under a minute).
Exit status 1 when ``prepare`` misses its bounds or the run's schedule is not valid.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from narwhal_sim.testing import SimFleet, start_sim_fleet

REPO = Path(__file__).resolve().parents[1]
LAUNCHER = REPO / "tools" / "measurement" / "load_trial.py"
RATE, GAP_CV = 50.0, 2.0
BLOCK = 512
SYSTEM_PROMPTS, FOLLOW_UP, RECENT = 64, 0.3, 1000
SEED = 1729
PREPARE_S, PREPARE_BYTES = 30.0, 1 << 30
CLIENT_CORE = 0
MAX_IN_FLIGHT = 512


def write_trace(path: Path, rows: int, seed: int) -> dict[str, Any]:
    """The seeded Mooncake trace (see the module's docstring); returns its shape."""
    rng = np.random.default_rng(seed)
    shape = 1 / GAP_CV**2
    gaps = rng.gamma(shape, 1 / RATE / shape, rows)
    gaps[0] = 0.0
    stamps_ms = np.round(np.cumsum(gaps) * 1000).astype(np.int64).tolist()
    inputs = np.clip(rng.lognormal(np.log(800), 0.9, rows), 64, 4096).astype(int).tolist()
    outputs = np.clip(rng.lognormal(np.log(16), 0.8, rows), 1, 64).astype(int).tolist()
    next_id = 0
    systems: list[list[int]] = []
    for size in rng.integers(1, 5, SYSTEM_PROMPTS).tolist():
        systems.append(list(range(next_id, next_id + size)))
        next_id += size
    weights = 1 / np.arange(1, SYSTEM_PROMPTS + 1)
    picks = rng.choice(SYSTEM_PROMPTS, rows, p=weights / weights.sum()).tolist()
    follow = (rng.random(rows) < FOLLOW_UP).tolist()
    back = rng.integers(1, RECENT + 1, rows).tolist()
    full_blocks: list[list[int]] = []
    shared = 0
    with path.open("w") as fh:
        for n in range(rows):
            blocks = -(-inputs[n] // BLOCK)
            turn = follow[n] and n >= back[n]  # a follow-up repeats an earlier prompt's blocks
            prefix = full_blocks[n - back[n]] if turn else systems[picks[n]]
            ids = prefix[:blocks]
            shared += len(ids)
            fresh = blocks - len(ids)
            ids = ids + list(range(next_id, next_id + fresh))
            next_id += fresh
            full_blocks.append(ids[: inputs[n] // BLOCK])
            fh.write(
                f'{{"timestamp": {stamps_ms[n]}, "input_length": {inputs[n]}, '
                f'"output_length": {outputs[n]}, "hash_ids": {json.dumps(ids)}}}\n'
            )
    return {
        "rows": rows,
        "span_s": stamps_ms[-1] / 1000,
        "mean_rate": rows / (stamps_ms[-1] / 1000),
        "mean_input": float(np.mean(inputs)),
        "mean_output": float(np.mean(outputs)),
        "distinct_block_ids": next_id,
        "shared_prefix_blocks": shared,
        "bytes": path.stat().st_size,
    }


def _pinned(cmd: Sequence[str], core: int) -> tuple[list[str], Callable[[], None] | None]:
    """``cmd`` pinned to ``core``: through ``taskset`` when there is one, else a preexec_fn."""
    if shutil.which("taskset"):
        return ["taskset", "-c", str(core), *cmd], None

    def pin() -> None:
        os.sched_setaffinity(0, {core})

    return list(cmd), pin


def measured(cmd: Sequence[str], log: Path, core: int) -> dict[str, Any]:
    """Run ``cmd`` pinned to ``core`` (output in ``log``); its exit code, wall time and rusage."""
    full, pin = _pinned(cmd, core)
    with log.open("wb") as out:
        started = time.perf_counter()
        proc = subprocess.Popen(
            full, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, preexec_fn=pin
        )
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    return {
        "exit_code": proc.returncode,
        "wall_s": wall,
        "peak_rss_mib": usage.ru_maxrss / 1024,  # Linux: KiB
        "cpu_s": usage.ru_utime + usage.ru_stime,
    }


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (``/proc/PID/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _tail(path: Path) -> str:
    return path.read_text(errors="replace")[-1500:]


def prepare(base: str, trace: Path, out: Path, log: Path, limit: int | None) -> dict[str, Any]:
    cmd = [sys.executable, str(LAUNCHER), "prepare", "--base", base, "--seed", str(SEED)]
    cmd += ["--out", str(out), "--trace", str(trace), "--trace-format", "mooncake"]
    if limit is not None:
        cmd += ["--limit", str(limit)]
    result = measured(cmd, log, CLIENT_CORE)
    if result["exit_code"] != 0:
        raise SystemExit(f"prepare exited {result['exit_code']}:\n{_tail(log)}")
    workload = out / "workload.json"
    doc = json.loads(workload.read_bytes())
    schedule = doc["schedule"]
    result["workload_mib"] = workload.stat().st_size / (1 << 20)
    result["requests"] = len(schedule["due_offsets_ns"])
    result["prefix_reuse"] = schedule["prefix_reuse"]
    result["pass"] = result["wall_s"] < PREPARE_S and result["peak_rss_mib"] * (1 << 20) < (
        PREPARE_BYTES
    )
    return result


def run(fleet: SimFleet, workload: Path, out: Path, log: Path) -> dict[str, Any]:
    assert fleet.router_url is not None
    cmd = [sys.executable, str(LAUNCHER), "run", "--base", fleet.router_url]
    cmd += ["--workload", str(workload), "--speedup", "1", "--ttft", "2", "--tpot", "0.0333"]
    cmd += ["--attainment", "0.95", "--out", str(out), "--max-in-flight", str(MAX_IN_FLIGHT)]
    sim_before = _cpu_s(fleet.process.pid)
    result = measured(cmd, log, CLIENT_CORE)
    sim_cpu = _cpu_s(fleet.process.pid) - sim_before
    if not (out / "summary.json").exists():
        raise SystemExit(f"run exited {result['exit_code']} without a summary:\n{_tail(log)}")
    s = json.loads((out / "summary.json").read_text())
    client, densest = s["client"], s["schedule"]["densest_second"]
    cpu = client["cpu_user_s"] + client["cpu_system_s"]
    result.update(
        {
            "requests": s["requests"],
            "counts": s["counts"],
            "good": s["good"],
            "pass": s["pass"],
            "client_schedule_valid": s["client_schedule_valid"],
            "schedule_misses": s["schedule_misses"],
            "max_lag_ms": (s["max_lag_s"] or 0) * 1e3,
            "scheduling_lag_p99_ms": (client["scheduling_lag_s"]["p99"] or 0) * 1e3,
            "event_loop_lag_p99_ms": (client["event_loop_lag_s"]["p99"] or 0) * 1e3,
            "max_in_flight": s["max_in_flight"],
            "offered_rate": s["offered_rate"],
            "achieved_rate": s["achieved_rate"],
            "duration_s": s["duration_s"],
            "span_s": s["schedule"]["span_s"],
            "densest_second": {
                "start_s": densest["start_s"],
                "requests": densest["requests"],
                "max_lag_ms": (densest["max_lag_s"] or 0) * 1e3,
                "misses": densest["misses"],
            },
            "client_cpu_s": cpu,
            "client_cpu_share": cpu / s["duration_s"] if s["duration_s"] else None,
            "client_cpu_per_request_ms": (client["cpu_per_sent_request_s"] or 0) * 1e3,
            "client_peak_rss_mib": client["peak_rss_bytes"] / (1 << 20),
            "ttft_p99_ms": (s["ttft_s"]["p99"] or 0) * 1e3,
            "tpot_p99_ms": (s["tpot_s"]["p99"] or 0) * 1e3,
            "sim_cpu_s": sim_cpu,
            "sim_cpu_share": sim_cpu / result["wall_s"],
        }
    )
    return result


def machine() -> dict[str, Any]:
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "load_average_1m_start": os.getloadavg()[0],
    }


def _print_prepare(title: str, r: dict[str, Any]) -> None:
    verdict = "PASS" if r["pass"] else "FAIL"
    reuse = r["prefix_reuse"]
    print(
        f"{title}: {r['requests']:,} requests in {r['wall_s']:.2f} s wall "
        f"({r['cpu_s']:.2f} s CPU), peak RSS {r['peak_rss_mib']:.0f} MiB, "
        f"workload.json {r['workload_mib']:.1f} MiB; prefix reuse holds {reuse['holds']}, "
        f"{reuse['reused_blocks']:,} of {reuse['blocks']:,} blocks repeat "
        f"[{verdict} against {PREPARE_S:.0f} s / 1 GiB]",
        flush=True,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--rows", type=int, help="trace rows prepared in full (default 100000)")
    parser.add_argument("--requests", type=int, help="the run's window (default 10000)")
    parser.add_argument("--quick", action="store_true", help="20,000 rows, a 1,000-request run")
    parser.add_argument("--engines", type=int, default=2, help="tiny engines behind the router")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--keep", type=Path, help="work in this new folder and keep it")
    args = parser.parse_args()
    rows = args.rows or (20_000 if args.quick else 100_000)
    requests = args.requests or (1_000 if args.quick else 10_000)
    if requests > rows:
        parser.error("--requests must not exceed --rows")
    cores = sorted(os.sched_getaffinity(0))
    sim_core = cores[-1]
    results: dict[str, Any] = {"machine": machine(), "rows": rows, "run_requests": requests}
    print(
        f"machine: {results['machine']['cpus']} CPUs ({results['machine']['cpu_model']}), "
        f"load average {results['machine']['load_average_1m_start']:.2f}; client on core "
        f"{CLIENT_CORE}, simulator on core {sim_core}",
        flush=True,
    )
    if args.keep:
        args.keep.mkdir(parents=True)
        folder = args.keep
        cleanup = None
    else:
        cleanup = tempfile.TemporaryDirectory(prefix="narwhal-trace-scale-")
        folder = Path(cleanup.name)
    try:
        trace = folder / "mooncake.jsonl"
        started = time.perf_counter()
        results["trace"] = write_trace(trace, rows, SEED)
        t = results["trace"]
        print(
            f"trace: {rows:,} rows over {t['span_s']:.0f} s ({t['mean_rate']:.1f}/s), "
            f"{t['bytes'] / 1e6:.1f} MB, written in {time.perf_counter() - started:.1f} s",
            flush=True,
        )
        os.sched_setaffinity(0, {sim_core})  # the simulator inherits it
        try:
            engines = [{"iid": f"tiny-{i}", "role": "mixed"} for i in range(args.engines)]
            fleet = start_sim_fleet(folder / "sim", engines, preset="tiny", router=True)
        finally:
            os.sched_setaffinity(0, set(cores))
        with fleet:
            assert fleet.router_url is not None
            full = prepare(fleet.router_url, trace, folder / "wl-full", folder / "p1.log", None)
            results["prepare_full"] = full
            _print_prepare("prepare (whole trace)", full)
            window = prepare(
                fleet.router_url, trace, folder / "wl-window", folder / "p2.log", requests
            )
            results["prepare_window"] = window
            _print_prepare(f"prepare (--limit {requests})", window)
            span = window["requests"] / RATE
            print(f"run: {requests:,} requests at speedup 1 (about {span:.0f} s) ...", flush=True)
            r = run(fleet, folder / "wl-window" / "workload.json", folder / "run", folder / "r.log")
            results["run"] = r
        results["load_average_1m_end"] = os.getloadavg()[0]
        d = r["densest_second"]
        print(
            f"run: exit {r['exit_code']}, client_schedule_valid {r['client_schedule_valid']}, "
            f"misses {r['schedule_misses']}, max lag {r['max_lag_ms']:.1f} ms, scheduling lag "
            f"p99 {r['scheduling_lag_p99_ms']:.2f} ms, loop lag p99 "
            f"{r['event_loop_lag_p99_ms']:.2f} ms\n"
            f"     offered {r['offered_rate']:.1f}/s over {r['span_s']:.0f} s, "
            f"max in flight {r['max_in_flight']}, good {r['good']:,} of {r['requests']:,} "
            f"(pass {r['pass']}), TTFT p99 {r['ttft_p99_ms']:.0f} ms\n"
            f"     densest second at {d['start_s']:.1f} s: {d['requests']} requests, max lag "
            f"{d['max_lag_ms']:.1f} ms, {d['misses']} misses\n"
            f"     client CPU {r['client_cpu_s']:.1f} s ({r['client_cpu_share']:.0%} of one "
            f"core, {r['client_cpu_per_request_ms']:.2f} ms a request), peak RSS "
            f"{r['client_peak_rss_mib']:.0f} MiB; simulator CPU {r['sim_cpu_s']:.1f} s "
            f"({r['sim_cpu_share']:.0%} of its core); load average "
            f"{results['load_average_1m_end']:.2f} at the end",
            flush=True,
        )
        if args.json:
            args.json.write_text(json.dumps(results, indent=2) + "\n")
        ok = full["pass"] and r["client_schedule_valid"]
        return 0 if ok else 1
    finally:
        if cleanup is not None:
            cleanup.cleanup()


if __name__ == "__main__":
    sys.exit(main())
