"""Poisson against constant arrivals at the same mean rate: predicted, then measured.

On one simulated mixed engine (the default preset, Llama-3.1-8B on an H200, ``max_num_seqs``
32):

1. profile it with ``narwhal-profile`` (a sweep covering the workload's 1,024-token prompts);
2. ``predict --find-max-rate`` for the constant shape (``--requests`` of 1,024 in / 64 out,
   TTFT <= ``--ttft`` (0.15 s), TPOT <= 33.3 ms, 95 %) and take ``--factor`` (0.9) times its
   highest passing rate as the mean rate;
3. ``prepare --arrivals constant`` and ``--arrivals poisson`` (seeds ``--seeds``, 0-4) at that rate;
4. ``predict --workload`` each (before running anything), then ``run --speedup 1`` each;
5. print predicted and measured attainment, TTFT p99, the worst lag and the densest second.

The claim: Poisson's bursts show in lag-free queueing (TTFT) and lower attainment, and ``predict``
anticipates the difference. ``--time-scale X`` runs the simulator X times faster (rates times X,
bounds / X); figures are in simulated time.

Run: ``.venv/bin/python bench/arrivals_compare.py [--requests 300] [--seeds 0,1] [--json FILE]``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from narwhal_sim.testing import start_sim_fleet

REPO = Path(__file__).resolve().parents[1]
LAUNCHER = REPO / "tools" / "measurement" / "load_trial.py"
INPUT, OUTPUT, TPOT_S, ATTAINMENT = 1024, 64, 0.0333, "0.95"
MAX_NUM_SEQS = 32
MODEL = "llama-3.1-8b"
ENGINE = {"iid": "h200-1.mixed", "role": "mixed", "model": MODEL}
SWEEP = (
    "--prefill-lens", "256,512,1024,2048",
    "--decode-input-lens", "512,1024",
    "--decode-concurrency", f"1,4,16,{MAX_NUM_SEQS}",
    "--decode-tokens", "200",
)  # fmt: skip


def _run(cmd: list[str], *, ok: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, check=False)
    if proc.returncode not in ok:
        sys.exit(f"{' '.join(cmd[:4])}... exit {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc


def _trial(*args: str, ok: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess[str]:
    return _run([sys.executable, str(LAUNCHER), *args], ok=ok)


def _bounds(scale: float, ttft_s: float) -> list[str]:
    return ["--ttft", f"{ttft_s / scale:g}", "--tpot", f"{TPOT_S / scale:g}",
            "--attainment", ATTAINMENT]  # fmt: skip


def _predicted(
    fleet: Path, store: Path, limits: Path, scale: float, ttft_s: float, *args: str
) -> Any:
    proc = _trial(
        "predict", "--fleet", str(fleet), "--profiles", str(store), "--limits", str(limits),
        *_bounds(scale, ttft_s), "--json", *args, ok=(0, 2),
    )  # fmt: skip
    return json.loads(proc.stdout)


def measure(
    folder: Path, requests: int, seeds: list[int], factor: float, scale: float, ttft_s: float
) -> Any:
    """Profile, predict, prepare and run; the rows of the comparison."""
    cfg = {
        "format": "narwhal.sim",
        "format_version": 1,
        "defaults": {"kv_cache_tokens": 330000, "max_num_seqs": MAX_NUM_SEQS},
    }
    with start_sim_fleet(folder, [ENGINE], sim_config=cfg, router=True, time_scale=scale) as sim:
        limits = folder / "limits.json"
        limits.write_text(json.dumps({
            "format": "narwhal.limits", "format_version": 1,
            "engines": {ENGINE["iid"]: {"max_num_seqs": MAX_NUM_SEQS}},
        }))  # fmt: skip
        started = time.monotonic()
        _run([sys.executable, "-m", "narwhal_profile_cli", "--fleet", str(sim.fleet_path),
              *SWEEP, "--limits", str(limits)])  # fmt: skip
        print(f"profiled in {time.monotonic() - started:.0f} s", flush=True)
        store = folder / "profiles" / "fleet-profiles.json"
        search = _predicted(
            sim.fleet_path, store, limits, scale, ttft_s, "--input-tokens", str(INPUT),
            "--output-tokens", str(OUTPUT), "--requests", str(requests), "--find-max-rate",
        )["search"]  # fmt: skip
        rate = round(search["max_rate"] * factor, 3)  # in the simulator's (scaled) time
        print(f"highest passing constant rate {search['max_rate']:.3f}/s; mean rate {rate}/s")
        engine = sim.urls[ENGINE["iid"]]
        kinds = [("constant", 0)] + [("poisson", s) for s in seeds]
        rows = []
        for kind, seed in kinds:
            name = f"{kind}-{seed}"
            _trial(
                "prepare", "--base", engine, "--seed", str(seed), "--out", str(folder / name),
                "--arrivals", kind, "--rate", f"{rate:g}", "--requests", str(requests),
                "--input-tokens", str(INPUT), "--output-tokens", str(OUTPUT),
            )  # fmt: skip
            workload = str(folder / name / "workload.json")
            doc = _predicted(sim.fleet_path, store, limits, scale, ttft_s, "--workload", workload)
            out = folder / f"run-{name}"
            _trial(
                "run", "--base", sim.router_url or "", "--workload", workload,
                *_bounds(scale, ttft_s),
                "--out", str(out), "--max-in-flight", "256", ok=(0, 2),
            )  # fmt: skip
            summary = json.loads((out / "summary.json").read_text())
            dense = summary["schedule"]["densest_second"]
            row = {
                "arrivals": kind,
                "seed": seed,
                "rate": rate / scale,
                "predicted": doc["prediction"]["attainment"],
                "predicted_ttft_p99": doc["prediction"]["ttft_s"]["p99"] * scale,
                "measured": summary["attainment"],
                "measured_ttft_p99": summary["ttft_s"]["p99"] * scale,
                "valid": summary["client_schedule_valid"],
                "max_lag_s": summary["max_lag_s"],
                "densest_second": dense["requests"],
                "densest_max_lag_s": dense["max_lag_s"],
            }
            rows.append(row)
            print(
                f"{kind:8} seed {seed}: predicted {row['predicted']:.3f} "
                f"(TTFT p99 {row['predicted_ttft_p99']:.3f} s), measured {row['measured']:.3f} "
                f"(TTFT p99 {row['measured_ttft_p99']:.3f} s), valid {row['valid']}, max lag "
                f"{row['max_lag_s'] * 1e3:.1f} ms, densest second {row['densest_second']} "
                f"requests (max lag {(dense['max_lag_s'] or 0) * 1e3:.1f} ms)",
                flush=True,
            )
    return {
        "requests": requests,
        "time_scale": scale,
        "ttft_s": ttft_s,
        "rate": rate / scale,
        "rows": rows,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--seeds", default="0,1,2,3,4", help="Poisson seeds, comma-separated")
    parser.add_argument("--factor", type=float, default=0.9, help="times the highest passing rate")
    parser.add_argument("--time-scale", type=float, default=1.0)
    parser.add_argument("--ttft", type=float, default=0.15, help="the TTFT bound, seconds")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",") if s]
    with tempfile.TemporaryDirectory(prefix="arrivals-") as tmp:
        doc = measure(Path(tmp), args.requests, seeds, args.factor, args.time_scale, args.ttft)
    if args.json is not None:
        args.json.write_text(json.dumps(doc, indent=2) + "\n")


if __name__ == "__main__":
    main()
