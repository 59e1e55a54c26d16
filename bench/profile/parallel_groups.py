"""``--parallel-groups``: wall time and fit agreement on a 4-group simulated fleet (not a test).

Starts four simulated engines, each on its own simulated GPU (``shared_device.group`` g0..g3) in
its own simulator process (default preset, real time unless ``--time-scale``, jitter 0 unless
``--jitter`` so that the runs differ only by how they were scheduled), then profiles the fleet
twice with the real command as a subprocess, default sweep options: one group at a time
(``--parallel-groups 1``) and all four at once (``--parallel-groups 4``). Prints both wall times
and their ratio (target <= 0.35), then, for every engine and every measured point (prefill
lengths; decode (concurrency, context) points), the parallel run's fit against the sequential
run's fit (target: within 2% everywhere).

Run: ``.venv/bin/python bench/profile/parallel_groups.py``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

from narwhal_sim.testing import sim_config, start_sim_fleet

GROUPS = 4


def say(line: str) -> None:
    """One line of the report on stdout."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _profile(fleet_doc: dict[str, Any], folder: Path, groups: int) -> tuple[float, dict[str, Any]]:
    """Profile the fleet from ``folder``; returns the wall time and the profiles by engine."""
    folder.mkdir(parents=True)
    fleet_path = folder / "fleet.json"
    fleet_path.write_bytes(orjson.dumps(fleet_doc))
    command = [sys.executable, "-m", "narwhal_profile_cli", "--fleet", str(fleet_path)]
    load = os.getloadavg()[0]
    started = time.monotonic()
    done = subprocess.run(
        [*command, "--parallel-groups", str(groups)], capture_output=True, text=True, check=False
    )
    wall = time.monotonic() - started
    if done.returncode != 0:
        say(f"--parallel-groups {groups}: exit {done.returncode}: {done.stderr.strip()}")
        raise SystemExit(1)
    store = orjson.loads((folder / "profiles" / "fleet-profiles.json").read_bytes())
    say(f"--parallel-groups {groups}: wall {wall:.1f} s (load average at start {load:.2f})")
    return wall, {p["key"]["engine"]: p for p in store["profiles"]}


def _prefill(profile: dict[str, Any], length: float) -> float:
    c = profile["prefill_fit"]["coefficients"]
    return float(c["a"] + c["b"] * length + c["c"] * length * length)


def _decode(profile: dict[str, Any], n: float, ctx: float) -> float:
    c = profile["decode_fit"]["coefficients"]
    return float(c["d0"] + c["d1"] * n + c["d2"] * n * ctx)


def _compare(sequential: dict[str, Any], parallel: dict[str, Any]) -> float:
    """Print every point's relative difference; return the worst."""
    worst = 0.0
    for iid in sorted(sequential):
        seq, par = sequential[iid], parallel[iid]
        rows = []
        for res in seq["prefill_fit"]["residuals"]:
            length = float(res["x"][0])
            a, b = _prefill(seq, length), _prefill(par, length)
            rows.append((f"prefill L={length:.0f}", a, b))
        for res in seq["decode_fit"]["residuals"]:
            n, ctx = float(res["x"][0]), float(res["x"][1])
            a, b = _decode(seq, n, ctx), _decode(par, n, ctx)
            rows.append((f"decode n={n:.0f} ctx={ctx:.0f}", a, b))
        engine_worst = max(abs(b - a) / a for _, a, b in rows)
        worst = max(worst, engine_worst)
        say(f"{iid}: worst {engine_worst:.2%} over {len(rows)} points")
        for label, a, b in rows:
            say(f"  {label:26s} seq {a * 1e3:9.3f} ms  par {b * 1e3:9.3f} ms  {(b - a) / a:+7.2%}")
    return worst


def main() -> int:
    """Run both sweeps and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-scale", type=float, default=1.0)
    parser.add_argument("--jitter", type=float, default=0.0)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="narwhal-parallel-"))
    engines: list[dict[str, Any]] = [
        {"iid": f"g{g}.mixed", "role": "mixed", "shared_device": {"group": f"g{g}"}}
        for g in range(GROUPS)
    ]
    try:
        config = sim_config({"jitter": args.jitter})
        with contextlib.ExitStack() as stack:
            # One simulator process per GPU group: real GPUs do not share a host event loop.
            sims = [
                stack.enter_context(
                    start_sim_fleet(
                        work / f"sim-{e['iid']}", [e], sim_config=config, time_scale=args.time_scale
                    )
                )
                for e in engines
            ]
            doc = orjson.loads(sims[0].fleet_path.read_bytes())
            doc["engines"] = [
                {**e, "url": sim.urls[str(e["iid"])]} for e, sim in zip(engines, sims, strict=True)
            ]
            doc["profiles"] = {"path": "profiles/fleet-profiles.json"}
            seq_s, sequential = _profile(doc, work / "sequential", 1)
            par_s, parallel = _profile(doc, work / "parallel", GROUPS)
        say(f"wall time ratio {par_s / seq_s:.3f} (target <= 0.35)")
        worst = _compare(sequential, parallel)
        say(f"worst fit difference at any measured point {worst:.2%} (target <= 2%)")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
