"""Profiler overhead of a default live sweep of one engine, judged by the engine's own stamps.

Starts one ``narwhal-sim`` engine (default preset, real time), runs the real ``narwhal-profile``
command as a subprocess with default sweep options, and splits its wall time (process start to
exit) with the simulator's server-side stamps (``GET /_sim/state``, ``GET /_sim/activity``):

* engine busy: the union of the spans in which the engine held at least one completion request
  (arrival to the end of its response), stamped by the engine;
* overhead = wall - engine busy, in four parts: before the first request (start-up, imports,
  preflight), the idle gaps between requests inside the sweep, and after the last response
  (fitting, writing, exit).

The sim's monotonic loop clock and this process's ``time.monotonic()`` are the same system clock,
so the parts add up. Not a test: it prints figures (run it on a quiet machine and note the load).

Run: ``.venv/bin/python bench/profile/overhead.py [--runs N]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from narwhal_sim.testing import start_sim_fleet

GAP_LIMIT_S = 0.020


def say(line: str) -> None:
    """One line of the report on stdout."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def one_run(work: Path, scale: float, extra: list[str]) -> float:
    """One sweep; prints its split and returns the overhead share of wall time."""
    with start_sim_fleet(work, [{"iid": "e0", "role": "mixed"}], time_scale=scale) as fleet:
        command = [sys.executable, "-m", "narwhal_profile_cli", "--fleet", str(fleet.fleet_path)]
        load = os.getloadavg()[0]
        started = time.monotonic()
        done = subprocess.run([*command, *extra], capture_output=True, text=True, check=False)
        ended = time.monotonic()
        if done.returncode != 0:
            say(f"narwhal-profile exited {done.returncode}: {done.stderr.strip()}")
            raise SystemExit(1)
        state = fleet.state("e0")
        first, last = float(state["completions_first_s"]), float(state["completions_last_s"])
        gaps = [(s, d) for s, d in fleet.idle_gaps("e0") if first <= s < last]
    wall = ended - started
    busy = float(state["engine_busy_s"])
    gpu = float(state["device_busy_s"]) / scale
    inside = sum(d for _, d in gaps)
    over = [(s - first, d) for s, d in gaps if d > GAP_LIMIT_S]
    overhead = wall - busy
    say(
        f"wall {wall:.3f} s; engine busy {busy:.3f} s (GPU steps {gpu:.3f} s); "
        f"overhead {overhead:.3f} s = {overhead / wall:.2%} "
        f"[before first request {first - started:.3f} s, {len(gaps)} gaps inside {inside:.3f} s "
        f"(largest {max((d for _, d in gaps), default=0.0) * 1e3:.1f} ms), "
        f"after last response {ended - last:.3f} s]; load average {load:.2f}"
    )
    for at, duration in over[:10]:
        say(f"  gap above {GAP_LIMIT_S * 1e3:.0f} ms: {duration * 1e3:.1f} ms at +{at:.3f} s")
    return overhead / wall


def main() -> int:
    """Run the sweeps and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--time-scale", type=float, default=1.0)
    parser.add_argument("extra", nargs="*", help="extra narwhal-profile options (after --)")
    args = parser.parse_args()
    shares = []
    for index in range(args.runs):
        work = Path(tempfile.mkdtemp(prefix="narwhal-overhead-"))
        try:
            shares.append(one_run(work, args.time_scale, list(args.extra)))
        finally:
            shutil.rmtree(work, ignore_errors=True)
        del index
    say(f"overhead median {statistics.median(shares):.2%} over {len(shares)} run(s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
