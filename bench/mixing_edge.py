"""The predicted edge against the measured edge, before and after the profile records the
engine's scheduler settings and measures how it mixes prefill and decode (docs/benchmarks.md,
"Mixing"; docs/design.md §13). Not a timed test.

Targets (``--target``):

- ``sim-shared``, ``sim-turns``: one ``narwhal-sim`` engine (the 8B-on-H200 preset) whose
  scheduler shares one step between prefill chunks and decodes, or takes turns; its development
  route is on, so the profile reads its budget (8,192) from the engine;
- ``vllm-default``: vLLM 0.32's CPU server (the conformance tier's venv and model), its budget
  (2,048) given in a limits file;
- ``vllm-256``: the same server with ``--max-num-batched-tokens 256`` and
  ``VLLM_SERVER_DEV_MODE=1``, so the profile reads the budget from ``/server_info``.

Per target: ``narwhal-profile --mixing``; ``prepare``; the SLO from the profile (TTFT at most
twice the fitted idle TTFT, TPOT at most 1.5 times the fitted single-stream TPOT, 90 %);
``predict --find-max-rate`` twice: *before* (the old assumptions: the store with
neither scheduler settings nor mixing fit, a budget of 8,192, one shared step) and *after* (the
profile as measured); then ``load_trial.py edge`` from the *after* band, which brackets the
measured edge to 5 %. Prints and saves (``--json``) the bracket and each prediction's 0.5 crossing
with its error against the bracket's midpoint.

Run: ``.venv/bin/python bench/mixing_edge.py --target sim-turns [--work DIR] [--json FILE]``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tools.conformance import _commands as cmd  # noqa: E402 - after the path
from tools.conformance._edge_check import slo_from_profile, write_limits  # noqa: E402
from tools.conformance._model import build_model  # noqa: E402 - after the path
from tools.conformance._server import SERVED_MODEL, running  # noqa: E402
from tools.conformance._suite import DEFAULT_SHAPE, DRAIN_GAUGES, Shape  # noqa: E402
from tools.conformance._venv import default_venv, ensure_venv  # noqa: E402 - after the path

from narwhal_sim.testing import free_port, sim_config, start_sim_fleet  # noqa: E402 - after the path
from narwhal_store import (  # noqa: E402 - after the path
    Generator,
    new_documents,
    read_store,
    write_store,
)

TARGETS = ("sim-shared", "sim-turns", "vllm-default", "vllm-256")
SIM_SHAPE = Shape((128, 256, 512, 1024), (128, 512), (1, 4, 8, 16, 32), 96, 3, 2, 512, 64)
VLLM_MAX_NUM_SEQS = 8
ATTAINMENT = "0.9"


def say(text: str) -> None:
    """One progress line."""
    print(f"mixing-edge: {text}", flush=True)


@contextlib.contextmanager
def target(name: str, work: Path) -> Iterator[tuple[str, Shape, Path | None]]:
    """The target's base URL, its sweep shape, and the limits file its profile is given."""
    if name.startswith("sim-"):
        config = {"scheduler": name.removeprefix("sim-"), "dev_mode": True}
        fleet = start_sim_fleet(
            work / "sim", [{"iid": "sim-0", "role": "mixed"}], sim_config=sim_config(config)
        )
        try:
            yield fleet.urls["sim-0"], SIM_SHAPE, None
        finally:
            fleet.stop()
        return
    venv = ensure_venv(default_venv(REPO), work / "install.log")
    model = work / "model"
    if not model.is_dir():
        build_model(venv.python, model)
    extra = ["--max-num-seqs", str(VLLM_MAX_NUM_SEQS)]
    env: dict[str, str] = {}
    limits: Path | None = write_limits(work, "profile-limits.json", max_num_batched_tokens=2048)
    if name == "vllm-256":
        extra += ["--max-num-batched-tokens", "256"]
        env["VLLM_SERVER_DEV_MODE"] = "1"
        limits = None
    with running(
        name, venv.python, model, free_port(), work / "server.log", extra=extra, env=env
    ) as server:
        yield server.url, DEFAULT_SHAPE, limits


def _before_store(store: Path, out: Path) -> Path:
    """The store as the predictor saw profiles before it modelled mixing: no scheduler or mixing."""
    loaded = read_store(store)
    profiles = [
        p.model_copy(update={"scheduler": None, "mixing_fit": None}) for p in loaded.store.profiles
    ]
    samples = [e.model_copy(update={"mixing_samples": []}) for e in loaded.sidecar.profiles]
    doc, side = new_documents(
        mode="live",
        fleet_sha256=loaded.store.fleet_sha256,
        generator=Generator(name="bench/mixing_edge.py", version="1"),
        profiles=profiles,
        samples=samples,
    )
    path = out / "fleet-profiles.json"
    write_store(path, doc, side, mode="fresh")
    return path


def _predict(
    work: Path, store: Path, shape: Shape, requests: int, slo: tuple[Decimal, Decimal], *extra: str
) -> dict[str, Any]:
    done = cmd.trial(
        "predict", "--fleet", str(work / "fleet.json"), "--profiles", str(store),
        "--input-tokens", str(shape.trial_input), "--output-tokens", str(shape.trial_output),
        "--requests", str(requests), "--ttft", str(slo[0]), "--tpot", str(slo[1]),
        "--attainment", ATTAINMENT, "--find-max-rate", "--json", *extra,
    )  # fmt: skip
    if done.returncode not in (0, 2):
        raise SystemExit(done.brief())
    doc: dict[str, Any] = json.loads(done.stdout)
    return doc


def measure(name: str, work: Path, requests: int) -> dict[str, Any]:
    """Profile, predict before and after, and measure the edge of one target."""
    with target(name, work) as (url, shape, limits):
        iid = "sim-0" if name.startswith("sim-") else "vllm-0"
        model = "meta-llama/Llama-3.1-8B-Instruct" if name.startswith("sim-") else SERVED_MODEL
        cmd.write_fleet(work, url, iid=iid, model=model)
        given = [] if limits is None else ["--limits", str(limits)]
        started = time.monotonic()
        done = cmd.profile(
            "--fleet",
            work / "fleet.json",
            *shape.sweep_args(),
            *given,
            "--mixing",
            "--format",
            "json",
        )
        say(f"{name}: profile exit {done.returncode} in {time.monotonic() - started:.0f} s")
        if done.returncode != 0:
            raise SystemExit(done.brief())
        store = work / "profiles" / "fleet-profiles.json"
        profile = cmd.read_json(store)["profiles"][0]
        slo = slo_from_profile(profile, shape.trial_input, shape.trial_output)
        done = cmd.trial(
            "prepare", "--base", url, "--input-tokens", str(shape.trial_input),
            "--output-tokens", str(shape.trial_output), "--seed", "1729",
            "--out", str(work / "workload"),
        )  # fmt: skip
        if done.returncode != 0:
            raise SystemExit(done.brief())
        caps = (
            ["--limits", str(write_limits(work, max_num_seqs=VLLM_MAX_NUM_SEQS))]
            if iid == "vllm-0"
            else []
        )
        before_store = _before_store(store, work / "profiles-before")
        before = _predict(
            work, before_store, shape, requests, slo, *caps, "--max-num-batched-tokens", "8192"
        )
        after = _predict(work, store, shape, requests, slo, *caps)
        band = after["search"]["band"]
        prior = before["search"]["band"]["pass_50"]
        say(f"{name}: SLO {slo[0]} s / {slo[1]} s; before pass_50 {prior}, after band {band}")
        gauges = [arg for gauge in DRAIN_GAUGES for arg in ("--drain-gauge", gauge)]
        started = time.monotonic()
        done = cmd.trial(
            "edge", "--base", url, "--workload", str(work / "workload" / "workload.json"),
            "--requests", str(requests), "--ttft", str(slo[0]), "--tpot", str(slo[1]),
            "--attainment", ATTAINMENT, "--out", str(work / "edge"),
            "--fleet", str(work / "fleet.json"), "--profiles", str(store), *caps, *gauges,
            "--tolerance", "0.05", "--max-trials", "10",
        )  # fmt: skip
        say(f"{name}: edge exit {done.returncode} in {time.monotonic() - started:.0f} s")
        if done.returncode not in (0, 2):
            raise SystemExit(done.brief())
    edge = cmd.read_json(work / "edge" / "edge.json")
    bracket = edge["bracket"]
    lo, hi = bracket["highest_pass"], bracket["lowest_miss"]
    mid = None if lo is None or hi is None else (lo + hi) / 2
    row: dict[str, Any] = {
        "target": name,
        "slo": [str(slo[0]), str(slo[1])],
        "scheduler": profile.get("scheduler"),
        "mixing_fit": (profile.get("mixing_fit") or {}).get("coefficients"),
        "mixing_error": [
            (profile.get("mixing_fit") or {}).get(k) for k in ("mean_rel_error", "worst_rel_error")
        ],
        "bracket": [lo, hi],
        "trials": len(edge["trials"]),
        "engines_after": after["inputs"]["engines"],
    }
    for label, doc in (("before", before), ("after", after)):
        b = doc["search"]["band"]
        row[label] = {
            "pass_90": b["pass_90"],
            "pass_50": b["pass_50"],
            "pass_10": b["pass_10"],
            "error_vs_mid": None if mid is None or b["pass_50"] is None else b["pass_50"] / mid - 1,
        }
    return row


def main() -> int:
    """Measure one target and print its row."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", choices=TARGETS, required=True)
    parser.add_argument("--work", type=Path, help="work folder (default: a new one)")
    parser.add_argument("--requests", type=int, default=60)
    parser.add_argument("--json", type=Path, help="also write the row here")
    args = parser.parse_args()
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    work = (args.work or REPO / ".bench-runs" / f"mixing-{args.target}-{stamp}").absolute()
    work.mkdir(mode=0o700, parents=True, exist_ok=False)
    row = measure(args.target, work, args.requests)
    b, a = row["before"], row["after"]
    say(
        f"{row['target']}: measured edge in {row['bracket']} ({row['trials']} trials); before "
        f"{b['pass_50']} ({b['error_vs_mid']}), after {a['pass_50']} ({a['error_vs_mid']}); "
        f"mixing {row['mixing_fit']} errors {row['mixing_error']}"
    )
    (work / "row.json").write_text(json.dumps(row, indent=2) + "\n", encoding="utf-8")
    if args.json is not None:
        args.json.write_text(json.dumps(row, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
