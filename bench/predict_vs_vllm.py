"""Predicted against measured on vLLM's own CPU server (not a timed test; docs/benchmarks.md).

1. start vLLM 0.32's OpenAI server (the conformance tier's venv, model and CPU split);
2. profile it with ``narwhal-profile`` (a sweep covering the trial's shape and decode batches up
   to 16);
3. prepare the trial's workload (512 tokens in, 32 out) and set the SLO from the profile: TTFT at
   most ``--ttft-factor`` x the fitted idle TTFT (2), TPOT at most ``--tpot-factor`` x the fitted
   single-stream TPOT (1.5);
4. ``predict --find-max-rate`` (Monte Carlo: the pass-probability band), then run a trial of
   ``--requests`` offers at each of ``--factors`` x the predicted edge;
5. print predicted (median and 5-95 % range) against measured attainment per rate, the mean and
   worst absolute error, and the predicted band against the measured bracket.

Every file goes into the work folder; ``--replay DIR`` predicts again from a finished folder
(the profiles and the trials' records kept) without starting anything, so the model can be
compared with the same measurements.

Run: ``.venv/bin/python bench/predict_vs_vllm.py [--work DIR] [--json FILE]``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tools.conformance import _commands as cmd  # noqa: E402 - after the path
from tools.conformance._edge_check import (  # noqa: E402 - after the path
    edge_meets_band,
    measured_edge,
    meets_range,
    slo_from_profile,
)
from tools.conformance._model import build_model  # noqa: E402 - after the path
from tools.conformance._server import MAX_MODEL_LEN, SERVED_MODEL, running  # noqa: E402
from tools.conformance._venv import default_venv, ensure_venv  # noqa: E402 - after the path

from narwhal_sim.testing import free_port  # noqa: E402 - after the path
from narwhal_trial import (  # noqa: E402 - after the path
    PredictRequest,
    TrialShape,
    TrialTarget,
    predict,
)

INPUT, OUTPUT = 512, 32
SWEEP = (
    "--prefill-lens", "128,256,512,1024",
    "--decode-input-lens", "128,512",
    "--decode-concurrency", "1,2,4,8,16",
    "--decode-tokens", "96",
    "--prefill-repeats", "5",
    "--decode-repeats", "3",
)  # fmt: skip
FACTORS = (0.5, 0.8, 0.9, 1.0, 1.1, 1.25, 1.4)
DRAIN = ("--drain-gauge", "vllm:num_requests_waiting", "--drain-gauge", "vllm:num_requests_running")


def say(text: str) -> None:
    """One progress line."""
    print(f"predict-vs-vllm: {text}", flush=True)


def slo(store: Path, ttft_factor: float, tpot_factor: float) -> tuple[Decimal, Decimal]:
    """The SLO from the profile: factors of the fitted idle TTFT and single-stream TPOT."""
    profile = cmd.read_json(store)["profiles"][0]
    return slo_from_profile(profile, INPUT, OUTPUT, ttft_factor, tpot_factor)


def predicted(
    work: Path,
    requests: int,
    target: TrialTarget,
    rate: float | None,
    replications: int,
) -> dict[str, Any]:
    """The prediction document (JSON) from the work folder's fleet and profiles."""
    doc = predict(
        PredictRequest(
            fleet=work / "fleet.json",
            profiles=work / "profiles" / "fleet-profiles.json",
            limits=None,
            shape=TrialShape(INPUT, OUTPUT, requests),
            target=target,
            rate=rate,
            find_max_rate=rate is None,
            replications=replications,
        )
    )
    result: dict[str, Any] = doc.model_dump(mode="json", by_alias=True)
    return result


def measured(run: Path, target: TrialTarget) -> dict[str, Any]:
    """A finished trial judged again from its records against ``target``."""
    records = cmd.read_jsonl(run / "requests.jsonl")
    summary = cmd.read_json(run / "summary.json")
    ttft, tpot = float(target.ttft_s), float(target.tpot_s)
    good = sum(
        1
        for r in records
        if r["status"] == "completed"
        and r["ttft_s"] is not None
        and r["ttft_s"] <= ttft
        and (r["tpot_s"] or 0.0) <= tpot
    )
    return {
        "good": good,
        "requests": len(records),
        "attainment": good / len(records),
        "schedule_valid": summary["client_schedule_valid"],
        "tpot_ms": [r["tpot_s"] * 1e3 for r in records if r["tpot_s"] is not None],
        "ttft_ms": [r["ttft_s"] * 1e3 for r in records if r["ttft_s"] is not None],
    }


def compare(work: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Predicted against measured for every trial in the work folder."""
    plan = cmd.read_json(work / "plan.json")
    if args.rejudge:  # the same records judged against an SLO set by this run's factors
        store = work / "profiles" / "fleet-profiles.json"
        ttft, tpot = slo(store, args.ttft_factor, args.tpot_factor)
        plan["ttft_s"], plan["tpot_s"] = str(ttft), str(tpot)
    target = TrialTarget(Decimal(plan["ttft_s"]), Decimal(plan["tpot_s"]), Decimal(args.attainment))
    search = predicted(work, plan["requests"], target, None, args.replications)["search"]
    rows = []
    for trial in plan["trials"]:
        run = work / trial["folder"]
        if not (run / "requests.jsonl").is_file():
            continue
        got = measured(run, target)
        doc = predicted(work, plan["requests"], target, trial["rate"], args.replications)
        p = doc["prediction"]
        lo, hi = p["attainment_interval"]["low"], p["attainment_interval"]["high"]
        rows.append(
            {
                "rate": trial["rate"],
                "measured": got["attainment"],
                "schedule_valid": got["schedule_valid"],
                "predicted": p["attainment"],
                "range": [lo, hi],
                "pass_probability": p["pass_probability"],
                "error": abs(p["attainment"] - got["attainment"]),
                "agrees": meets_range(got["good"], got["requests"], lo, hi),
                "tpot_ms_pred": [p["tpot_s"]["p50"] * 1e3, p["tpot_s"]["p99"] * 1e3],
                "ttft_ms_pred": [p["ttft_s"]["p50"] * 1e3, p["ttft_s"]["p99"] * 1e3],
                "tpot_ms_meas": _p50_p99(got["tpot_ms"]),
                "ttft_ms_meas": _p50_p99(got["ttft_ms"]),
            }
        )
    errors = [r["error"] for r in rows]
    bracket = measured_edge([(r["rate"], r["measured"]) for r in rows], float(args.attainment))
    in_band = edge_meets_band(bracket, search["band"])
    return {
        "ttft_s": plan["ttft_s"],
        "tpot_s": plan["tpot_s"],
        "band": search["band"],
        "rows": rows,
        "mean_abs_error": sum(errors) / len(errors) if errors else None,
        "worst_abs_error": max(errors) if errors else None,
        "measured_bracket": [bracket[0], None if bracket[1] == float("inf") else bracket[1]],
        "rates_agree": sum(1 for r in rows if r["agrees"]),
        "edge_in_band": in_band,
    }


def _p50_p99(values: list[float]) -> list[float]:
    ordered = sorted(values)
    if not ordered:
        return [0.0, 0.0]
    return [ordered[len(ordered) // 2], ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]]


def measure(work: Path, args: argparse.Namespace) -> None:
    """Start the server, profile, prepare, predict the edge and run the trials."""
    venv = ensure_venv(default_venv(REPO), work / "install.log")
    model = work / "model"
    if not model.is_dir():
        build_model(venv.python, model)
    port = free_port()
    with running("bench", venv.python, model, port, work / "server.log") as server:
        say(f"vLLM ready at {server.url} ({server.ready_s:.0f} s)")
        contract = {"model": SERVED_MODEL, "max_model_len": MAX_MODEL_LEN, "version": "0.32.0"}
        cmd.write_fleet(work, server.url, iid="vllm-0", model=SERVED_MODEL, contract=contract)
        done = cmd.profile("--fleet", work / "fleet.json", *SWEEP, "--format", "json")
        say(f"profile exit {done.returncode} in {done.wall_s:.0f} s")
        if done.returncode != 0:
            raise SystemExit(done.brief())
        done = cmd.trial(
            "prepare", "--base", server.url, "--input-tokens", str(INPUT),
            "--output-tokens", str(OUTPUT), "--seed", "1729", "--out", str(work / "workload"),
        )  # fmt: skip
        if done.returncode != 0:
            raise SystemExit(done.brief())
        store = work / "profiles" / "fleet-profiles.json"
        ttft, tpot = slo(store, args.ttft_factor, args.tpot_factor)
        target = TrialTarget(ttft, tpot, Decimal(args.attainment))
        search = predicted(work, args.requests, target, None, args.replications)["search"]
        edge = search["band"]["pass_50"]
        say(f"SLO TTFT ≤ {ttft} s, TPOT ≤ {tpot} s; predicted band {search['band']}")
        plan: dict[str, Any] = {
            "ttft_s": str(ttft),
            "tpot_s": str(tpot),
            "requests": args.requests,
            "edge": edge,
            "trials": [],
        }
        for k, factor in enumerate(args.factors):
            rate = round(edge * factor, 3)
            folder = f"trial-{k:02d}-rate-{rate:g}"
            plan["trials"].append({"rate": rate, "folder": folder})
            (work / "plan.json").write_text(json.dumps(plan, indent=2) + "\n", encoding="utf-8")
            done = cmd.trial(
                "run", "--base", server.url, "--workload", str(work / "workload" / "workload.json"),
                "--rate", str(rate), "--requests", str(args.requests), "--ttft", str(ttft),
                "--tpot", str(tpot), "--attainment", args.attainment, *DRAIN,
                "--out", str(work / folder),
            )  # fmt: skip
            say(f"trial at {rate:g}/s: exit {done.returncode} in {done.wall_s:.0f} s")


def main() -> int:
    """Measure (or replay), then compare and print."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, help="work folder (default: a new one)")
    parser.add_argument("--replay", type=Path, help="compare a finished work folder again")
    parser.add_argument("--requests", type=int, default=60)
    parser.add_argument("--attainment", default="0.9")
    parser.add_argument("--ttft-factor", type=float, default=2.0)
    parser.add_argument("--tpot-factor", type=float, default=1.5)
    parser.add_argument("--replications", type=int, default=100)
    parser.add_argument("--factors", type=lambda s: [float(x) for x in s.split(",")],
                        default=list(FACTORS))  # fmt: skip
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument(
        "--rejudge",
        action="store_true",
        help="with --replay: judge the records against the SLO of --ttft-factor/--tpot-factor",
    )
    args = parser.parse_args()
    start = time.monotonic()
    if args.replay is not None:
        work = args.replay
    else:
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        work = (args.work or REPO / ".bench-runs" / f"predict-vllm-{stamp}").absolute()
        work.mkdir(mode=0o700, parents=True, exist_ok=False)
        measure(work, args)
    figures = compare(work, args)
    for r in figures["rows"]:
        lo, hi = r["range"]
        say(
            f"{r['rate']:7.3f}/s measured {r['measured']:.3f} predicted {r['predicted']:.3f} "
            f"[{lo:.3f}, {hi:.3f}] p(pass) {r['pass_probability']:.2f}"
            f"{'' if r['agrees'] else ' DISAGREES'}; TPOT p50/p99 "
            f"{r['tpot_ms_meas'][0]:.2f}/{r['tpot_ms_meas'][1]:.2f} vs "
            f"{r['tpot_ms_pred'][0]:.2f}/{r['tpot_ms_pred'][1]:.2f} ms; TTFT p50/p99 "
            f"{r['ttft_ms_meas'][0]:.1f}/{r['ttft_ms_meas'][1]:.1f} vs "
            f"{r['ttft_ms_pred'][0]:.1f}/{r['ttft_ms_pred'][1]:.1f} ms"
        )
    band = figures["band"]
    say(
        f"mean |error| {figures['mean_abs_error']}, worst {figures['worst_abs_error']}; band "
        f"0.9/0.5/0.1 at {band['pass_90']}/{band['pass_50']}/{band['pass_10']}, measured bracket "
        f"{figures['measured_bracket']}; {figures['rates_agree']}/{len(figures['rows'])} rates "
        f"agree, edge in band: {figures['edge_in_band']} ({time.monotonic() - start:.0f} s)"
    )
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
