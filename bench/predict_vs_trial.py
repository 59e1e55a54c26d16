"""Predicted against measured: ``load_trial.py predict`` checked by the trial (not a timed test).

For each fleet (the runbook's split fleet: a prefill and a decode engine sharing GPU ``h200-0``;
and a mixed-only fleet: one mixed engine), on the simulated default preset (Llama-3.1-8B, H200):

1. start ``narwhal-sim`` with its router and journal;
2. profile the fleet with ``narwhal-profile`` (a sweep that covers 8,192 input tokens and decode
   batches up to the engines' ``max_num_seqs`` of 32, given to the simulator, the profiler and
   ``predict``: beyond it requests queue, in the simulator as in the model);
3. ``predict --find-max-rate`` for the runbook's shape (200 requests, 8,192 in / 128 out,
   TTFT ≤ 2 s, TPOT ≤ 33.3 ms, 95 %), then predict at 5 rates around the predicted highest passing
   rate (0.6, 0.9, 1.0, 1.1 and 1.5 times it: from a clear pass to a clear miss);
4. run the trial at each rate (``load_trial.py run`` as the runbook types it) and reconcile it with
   the router journal;
5. print predicted and measured attainment per rate, and the predicted highest passing rate with
   the measured bracket (highest rate that passed, lowest that missed).

Targets: attainment within 0.05 absolute at every rate; highest passing rate within 10 %.
With ``--time-scale X`` the simulator runs X times faster (rates times X, latency bounds / X);
figures are reported in simulated time.

Run: ``.venv/bin/python bench/predict_vs_trial.py [--time-scale 2] [--json FILE]``; ``--replay DIR``
predicts again for a finished work folder (profiles and runs kept) without running anything.

``backtest_target`` is the backtest's simulated variant (``bench/predict_vs_vllm.py``, ``make
bench-predict``): one mixed engine with its step noise on.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench._backtest import Shape, Target  # noqa: E402 - after the path
from tools.conformance._edge_check import write_limits  # noqa: E402 - after the path
from tools.conformance._suite import IID  # noqa: E402 - after the path

from narwhal_sim.testing import start_sim_fleet  # noqa: E402 - after the path
from narwhal_trial import (  # noqa: E402 - after the path
    OutsideDomainError,
    PredictRequest,
    TrialShape,
    TrialTarget,
    predict,
)

LAUNCHER = REPO / "tools" / "measurement" / "load_trial.py"
INPUT, OUTPUT, REQUESTS, TTFT_S, TPOT_S, ATTAINMENT = 8192, 128, 200, 2.0, 0.0333, "0.95"
KV_TRANSFER_S_PER_TOKEN = 2.5e-6  # the simulator's default
FACTORS = (0.6, 0.9, 1.0, 1.1, 1.5)
MAX_NUM_SEQS = 32  # every engine's limit (sim config and limits file): overload queues, as vLLM's
SWEEP = (
    "--prefill-lens", "256,512,1024,2048,4096,8192,12288",  # short ones pin the intercept
    "--decode-input-lens", "4096,8192",
    "--decode-concurrency", f"1,4,16,{MAX_NUM_SEQS}",
    "--decode-tokens", "600",  # 32 prefills of 8k serialise: the cohort needs a long window
)  # fmt: skip
MODEL = "llama-3.1-8b"
FLEETS: dict[str, list[dict[str, Any]]] = {
    "split": [
        {"iid": "h200-0.prefill", "role": "prefill", "model": MODEL,
         "shared_device": {"group": "h200-0"}},
        {"iid": "h200-0.decode", "role": "decode", "model": MODEL,
         "shared_device": {"group": "h200-0"}},
    ],
    "mixed": [{"iid": "h200-1.mixed", "role": "mixed", "model": MODEL}],
}  # fmt: skip


#: The backtest's simulated engine: every step's duration times 1 + N(0, sigma) (the ``noise``
#: fault), so the profile, the probe and the trials each meet an engine that never runs the same
#: twice; its settings shown to the profile (``dev_mode``: ``/server_info``).
BACKTEST_NOISE = 0.1
BACKTEST_SHAPES = (Shape(1024, 64), Shape(512, 128))
BACKTEST_SWEEP = (
    "--prefill-lens", "256,512,1024,2048",
    "--decode-input-lens", "512,1024",
    "--decode-concurrency", f"1,4,8,16,{MAX_NUM_SEQS}",
    "--decode-tokens", "200",
)  # fmt: skip


@contextmanager
def backtest_target(folder: Path) -> Iterator[Target]:
    """The simulated variant, running: one mixed engine of the default preset (iid ``vllm-0``,
    as the vLLM variants' one engine, so the probe is read the same way), noise on."""
    cfg = {
        "format": "narwhal.sim",
        "format_version": 1,
        "defaults": {
            "max_num_seqs": MAX_NUM_SEQS,
            "dev_mode": True,
            "faults": {"noise": BACKTEST_NOISE},
        },
    }
    engines = [{"iid": IID, "role": "mixed", "model": MODEL}]
    with start_sim_fleet(folder, engines, sim_config=cfg) as sim:
        yield Target(
            variant="sim",
            folder=folder,
            base=sim.urls[IID],
            fleet=sim.fleet_path,
            limits=write_limits(folder, max_num_seqs=MAX_NUM_SEQS),
            profile_args=BACKTEST_SWEEP,
            shapes=BACKTEST_SHAPES,
            about=f"narwhal-sim, default preset, max_num_seqs {MAX_NUM_SEQS}, step noise sigma "
            f"{BACKTEST_NOISE}",
        )


def _run(cmd: list[str], *, ok: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, check=False)
    if proc.returncode not in ok:
        sys.exit(f"{' '.join(cmd[:3])}... exit {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc


def _trial(*args: str, ok: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess[str]:
    return _run([sys.executable, str(LAUNCHER), *args], ok=ok)


def _request(
    fleet: Path, store: Path, scale: float, rate: float | None, requests: int
) -> PredictRequest:
    return PredictRequest(
        fleet=fleet,
        profiles=store,
        limits=fleet.parent / "limits.json",
        shape=TrialShape(INPUT, OUTPUT, requests, KV_TRANSFER_S_PER_TOKEN / scale),
        target=TrialTarget(
            Decimal(f"{TTFT_S / scale:g}"), Decimal(f"{TPOT_S / scale:g}"), Decimal(ATTAINMENT)
        ),
        rate=None if rate is None else rate * scale,
        find_max_rate=rate is None,
    )


def measure_fleet(name: str, folder: Path, scale: float, requests: int, retries: int) -> Path:
    """Start the fleet, profile it, run the trial at 5 rates around the predicted highest passing
    rate (a run whose client fell behind, ``lag`` misses, is repeated as the runbook says); the
    runs are listed in ``rates.json``. Returns the fleet's folder."""
    work = folder / name
    work.mkdir()
    cfg = {
        "format": "narwhal.sim",
        "format_version": 1,
        "defaults": {
            "kv_cache_tokens": 330000,
            "gpu_memory_utilization": 0.45,
            "max_num_seqs": MAX_NUM_SEQS,
        },
    }
    with start_sim_fleet(work, FLEETS[name], sim_config=cfg, router=True, time_scale=scale) as sim:
        started = time.monotonic()
        limits = {
            "format": "narwhal.limits",
            "format_version": 1,
            "engines": {e["iid"]: {"max_num_seqs": MAX_NUM_SEQS} for e in FLEETS[name]},
        }
        (work / "limits.json").write_text(json.dumps(limits))
        profile = [sys.executable, "-m", "narwhal_profile_cli", "--fleet", str(sim.fleet_path)]
        _run([*profile, *SWEEP, "--limits", str(work / "limits.json")])
        print(f"[{name}] profiled in {time.monotonic() - started:.0f} s", flush=True)
        store = work / "profiles" / "fleet-profiles.json"
        engine = sim.urls[FLEETS[name][-1]["iid"]]
        _trial(
            "prepare", "--base", engine, "--input-tokens", str(INPUT),
            "--output-tokens", str(OUTPUT), "--seed", "1729", "--out", str(work / "workload"),
        )  # fmt: skip
        search = predict(_request(sim.fleet_path, store, scale, None, requests)).search
        assert search is not None and search.max_rate is not None, search
        best = search.max_rate / scale
        runs: list[dict[str, Any]] = []
        for factor in FACTORS:
            rate = round(best * factor, 3)
            for attempt in range(retries + 1):
                out = work / f"rate-{rate:g}" if not attempt else work / f"rate-{rate:g}-{attempt}"
                _trial(
                    "run", "--base", sim.router_url or "", "--workload",
                    str(work / "workload" / "workload.json"), "--rate", f"{rate * scale:g}",
                    "--requests", str(requests), "--ttft", f"{TTFT_S / scale:g}",
                    "--tpot", f"{TPOT_S / scale:g}", "--attainment", ATTAINMENT,
                    "--out", str(out), ok=(0, 2),
                )  # fmt: skip
                rec = _trial(
                    "reconcile", "--requests", str(out / "requests.jsonl"),
                    "--journal", str(sim.journal_path), ok=(0, 2),
                )  # fmt: skip
                summary = json.loads((out / "summary.json").read_text())
                lagged = summary["schedule_misses"].get("lag", 0)
                print(
                    f"[{name}] rate {rate:.3f}/s run {out.name}: attainment "
                    f"{summary['attainment']:.3f}, lag misses {lagged}",
                    flush=True,
                )
                if not lagged:
                    break
            runs.append({"rate": rate, "run": out.name, "reconciled": rec.returncode == 0})
    (work / "rates.json").write_text(json.dumps({"time_scale": scale, "runs": runs}))
    return work


def evaluate(work: Path, requests: int) -> dict[str, Any]:
    """Predict from the fleet folder's files (current code) and set beside each measured run."""
    plan = json.loads((work / "rates.json").read_text())
    scale = float(plan["time_scale"])
    fleet, store = work / "fleet.json", work / "profiles" / "fleet-profiles.json"
    t0 = time.perf_counter()
    search = predict(_request(fleet, store, scale, None, requests)).search
    search_s = time.perf_counter() - t0
    assert search is not None and search.max_rate is not None, search
    rows = []
    for entry in plan["runs"]:
        rate = entry["rate"]
        t0 = time.perf_counter()
        try:
            predicted = predict(_request(fleet, store, scale, rate, requests)).prediction
        except OutsideDomainError as exc:
            print(f"[{work.name}] rate {rate:.3f}/s: {exc.message}", flush=True)
            continue
        predict_s = time.perf_counter() - t0
        assert predicted is not None
        summary = json.loads((work / entry["run"] / "summary.json").read_text())
        row = {
            "rate": rate,
            "run": entry["run"],
            "predicted": predicted.attainment,
            "interval": [predicted.attainment_interval.low, predicted.attainment_interval.high],
            "predicted_pass": predicted.passed,
            "predicted_misses": predicted.schedule_misses,
            "measured": summary["attainment"],
            "measured_pass": summary["pass"],
            "measured_misses": summary["schedule_misses"],
            "schedule_valid": summary["client_schedule_valid"],
            "reconciled": entry["reconciled"],
            "predicted_ttft_p50": None if predicted.ttft_s is None else predicted.ttft_s.p50,
            "measured_ttft_p50": summary["ttft_s"]["p50"],
            "predicted_tpot_p50": None if predicted.tpot_s is None else predicted.tpot_s.p50,
            "measured_tpot_p50": summary["tpot_s"]["p50"],
            "predict_s": predict_s,
        }
        rows.append(row)
        print(f"[{work.name}] {_line(row, scale)}", flush=True)
    passed = [r["rate"] for r in rows if r["measured_pass"]]
    missed = [r["rate"] for r in rows if not r["measured_pass"]]
    return {
        "fleet": work.name,
        "predicted_max_rate": search.max_rate / scale,
        "search_s": search_s,
        "measured_highest_pass": max(passed) if passed else None,
        "measured_lowest_miss": min(missed) if missed else None,
        "rows": rows,
    }


def _ms(value: float | None, scale: float) -> str:
    return "n/a" if value is None else f"{value * scale * 1000:.0f}"


def _line(r: dict[str, Any], scale: float) -> str:
    diff = r["measured"] - r["predicted"]
    return (
        f"rate {r['rate']:.3f}/s: predicted {r['predicted']:.3f} "
        f"[{r['interval'][0]:.3f}, {r['interval'][1]:.3f}] "
        f"{'pass' if r['predicted_pass'] else 'miss'}, measured {r['measured']:.3f} "
        f"{'pass' if r['measured_pass'] else 'miss'} (diff {diff:+.3f}); TTFT p50 ms "
        f"{_ms(r['predicted_ttft_p50'], scale)}/{_ms(r['measured_ttft_p50'], scale)}, TPOT p50 ms "
        f"{_ms(r['predicted_tpot_p50'], scale)}/{_ms(r['measured_tpot_p50'], scale)}; "
        f"schedule {'valid' if r['schedule_valid'] else 'INVALID'}, "
        f"{'reconciled' if r['reconciled'] else 'NOT reconciled'}"
    )


def table(results: list[dict[str, Any]]) -> str:
    """The markdown table of every fleet's rows and the highest passing rates."""
    lines = [
        "| fleet | rate (req/s) | predicted attainment [interval] | measured | diff | "
        "predicted / measured verdict | schedule misses predicted / measured (cap, lag) |",
        "| --- | ---: | --- | ---: | ---: | --- | --- |",
    ]
    for res in results:
        for r in res["rows"]:
            lines.append(
                f"| {res['fleet']} | {r['rate']:.3f} | {r['predicted']:.3f} "
                f"[{r['interval'][0]:.3f}, {r['interval'][1]:.3f}] | {r['measured']:.3f} | "
                f"{r['measured'] - r['predicted']:+.3f} | "
                f"{'pass' if r['predicted_pass'] else 'miss'} / "
                f"{'pass' if r['measured_pass'] else 'miss'} | {r['predicted_misses']} / "
                f"{r['measured_misses'].get('in_flight_cap', 0)}, "
                f"{r['measured_misses'].get('lag', 0)} |"
            )
    lines.append("")
    for res in results:
        lo, hi = res["measured_highest_pass"], res["measured_lowest_miss"]
        lines.append(
            f"{res['fleet']}: predicted highest passing rate {res['predicted_max_rate']:.3f}/s "
            f"(search {res['search_s']:.2f} s); measured: passed up to "
            f"{'none' if lo is None else f'{lo:.3f}'}, missed from "
            f"{'none' if hi is None else f'{hi:.3f}'}"
        )
    return "\n".join(lines)


def main() -> int:
    """Run the benchmark (or ``--replay`` a finished one); prints the table, writes ``--json``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-scale", type=float, default=1.0)
    parser.add_argument("--requests", type=int, default=REQUESTS)
    parser.add_argument("--fleets", default="split,mixed")
    parser.add_argument("--retries", type=int, default=2, help="repeats of a run with lag misses")
    parser.add_argument("--replay", type=Path, help="a finished work folder: predict again only")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    folder = args.replay or Path(tempfile.mkdtemp(prefix="predict-vs-trial-"))
    print(f"work folder {folder}", flush=True)
    works = [
        folder / name
        if args.replay
        else measure_fleet(name, folder, args.time_scale, args.requests, args.retries)
        for name in args.fleets.split(",")
    ]
    results = [evaluate(work, args.requests) for work in works]
    print(table(results))
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
