"""The predicted sustainable rate against long trials on the simulated demo fleet (not a test).

``make demo``'s fleet (a prefill and a decode engine sharing GPU ``h200-0``, a mixed engine on
``h200-1``), profiled as the demo profiles it (decode batches up to 16), in real time:

1. start ``narwhal-sim`` with its router;
2. profile the fleet with ``narwhal-profile`` and prepare the runbook's workload;
3. ``predict --find-max-rate`` for 1,000-request trials of the runbook's shape (8,192 in / 128
   out, TTFT ≤ 2 s, TPOT ≤ 33.3 ms, 95 %): the sustainable rate and the trial-sized edge;
4. run a 1,000-request trial at each factor of the sustainable rate (default 0.92, 1.0, 1.08);
5. print each trial's good count and verdict.

The sustainable rate is right when the trials at and below it pass and the one 8 % above misses.

Run: ``.venv/bin/python bench/sustainable_vs_trial.py [FACTOR ...]`` (about 10 minutes).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tools import demo  # noqa: E402 - after the repository joins the path

from narwhal_sim.testing import free_port  # noqa: E402 - after the repository joins the path

REQUESTS = 1000
SLO = ("--ttft", "2", "--tpot", "0.0333", "--attainment", "0.95")


def main(argv: list[str] | None = None) -> int:
    """Profile, predict, run the trials; print one line per trial."""
    parser = argparse.ArgumentParser(prog="bench/sustainable_vs_trial.py", description=__doc__)
    parser.add_argument("factors", nargs="*", type=float, default=[0.92, 1.0, 1.08])
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="sustainable-"))
    fleet, sim_config, _ = demo.write_fleet(work, free_port())
    with demo.sim_fleet(work, fleet, sim_config, free_port(), 1.0) as base:
        demo.step("profile", [*demo.profile_command(), "--fleet", str(fleet), *demo.PROFILE_SWEEP])
        store = work / "profiles" / "fleet-profiles.json"
        workload = work / "workload" / "workload.json"
        demo.step("prepare", demo.trial(
            "prepare", "--base", base, "--input-tokens", "8192", "--output-tokens", "128",
            "--seed", "1729", "--out", str(workload.parent),
        ))  # fmt: skip
        predicted = work / "prediction.json"
        demo.step("predict", demo.trial(
            "predict", "--fleet", str(fleet), "--profiles", str(store), "--input-tokens", "8192",
            "--output-tokens", "128", "--requests", str(REQUESTS), "--find-max-rate", *SLO,
            "--kv-transfer-s-per-token", "2.5e-6", "--out", str(predicted),
        ), ok=(0, 2))  # fmt: skip
        search = json.loads(predicted.read_text())["search"]
        sustainable = float(search["sustainable"]["rate"])
        demo.say(
            f"predicted: sustainable {sustainable:.4g}/s ({search['sustainable']['source']}), "
            f"{REQUESTS}-request edge {search['max_rate']:.4g}/s"
        )
        for factor in args.factors:
            rate = round(sustainable * factor, 3)
            out = work / f"rate-{rate:g}"
            demo.step(f"trial at {factor:g} x sustainable", demo.trial(
                "run", "--base", base, "--workload", str(workload), "--rate", f"{rate:g}",
                "--requests", str(REQUESTS), *SLO, "--out", str(out),
            ), ok=(0, 2))  # fmt: skip
            s = json.loads((out / "summary.json").read_text())
            verdict = "PASS" if s["exit_code"] == 0 else "MISS"
            demo.say(
                f"measured: {factor:g} x sustainable = {rate:g}/s: {s['good']}/{s['requests']} "
                f"good -> {verdict} (schedule valid: {s['client_schedule_valid']})"
            )
    demo.say(f"records: {work}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
