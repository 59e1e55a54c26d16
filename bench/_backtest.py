"""The backtest's measuring half: one variant's engine profiled, then for each workload shape a
freshness probe, predictions with and without it, and a trial at every rate.

Per variant (a running engine, described by a ``Target``): ``narwhal-profile`` once. Per shape:
``prepare`` its workload; ``narwhal-profile --verify`` (the probe) right before the shape's
predictions; the SLO from the profile (``slo_from_profile``: TTFT at most twice the fitted idle
TTFT, TPOT at most 1.5 times the fitted single-stream TPOT, 90 %), put where the prediction
believes the probe found the engine (``rescaled_slo``, the factors raised to the default probe
weight); ``predict --find-max-rate`` with the probe, whose 0.5 crossing is the
edge, and without it; at each factor of the edge ``predict --rate`` with and without
``--calibrate PROBE``; then one trial of ``REQUESTS`` offers per rate, lowest first.

Everything goes into the variant's folder, one folder per shape with its ``plan.json`` (written
after every step, so an interrupted run can be scored as far as it got); ``_backtest_report``
scores it. ``repredict`` makes every prediction of a finished folder again with the predictor
installed now, against the same profiles, probes and trials. Commands run as the runbook types
them (``tools/conformance/_commands``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from tools.conformance import _commands as cmd
from tools.conformance._edge_check import MAX_LAG_S, probe_factors, rescaled_slo, slo_from_profile
from tools.conformance._edge_claims import ATTAINMENT, REQUESTS
from tools.conformance._suite import DRAIN_GAUGES, TRIAL_SEED

#: Rates, times the edge predicted with the probe: from a clear pass to a clear miss.
FACTORS = (0.5, 0.7, 0.9, 1.0, 1.1, 1.3, 1.5)
#: ``--quick``'s rates.
QUICK_FACTORS = (0.5, 0.9, 1.1, 1.5)
#: The two forecasts of every rate: the engine's speed from the probe, or from the profile alone.
FORECASTS = ("probe", "profile")

Say = Callable[[str], None]


@dataclass(frozen=True)
class Shape:
    """A workload shape: tokens in and out of every request."""

    input_tokens: int
    output_tokens: int

    @property
    def name(self) -> str:
        """``512x32``."""
        return f"{self.input_tokens}x{self.output_tokens}"


@dataclass(frozen=True)
class Target:
    """One variant's running engine: where its trials go, how to profile and predict it."""

    variant: str
    folder: Path
    base: str
    fleet: Path
    #: ``predict``'s ``--limits`` (the engine's ``max_num_seqs``), or None.
    limits: Path | None
    #: The sweep and any other ``narwhal-profile`` option (``--mixing``, ``--limits``).
    profile_args: tuple[str, ...]
    shapes: tuple[Shape, ...]
    #: A few words on the engine, for the table.
    about: str
    env: Mapping[str, str] = field(default_factory=dict)

    @property
    def store(self) -> Path:
        """The profile store the sweep writes (the fleet file's ``profiles.path``)."""
        return self.folder / "profiles" / "fleet-profiles.json"


def write_json(path: Path, doc: Mapping[str, Any]) -> None:
    """``doc`` as indented JSON."""
    path.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")


def command_log(log: Path) -> Callable[[cmd.Done], cmd.Done]:
    """A pass-through for every command's result that appends its brief to ``log``."""

    def keep(done: cmd.Done) -> cmd.Done:
        with log.open("a", encoding="utf-8") as out:
            out.write(done.brief(limit=20_000) + "\n\n")
        return done

    return keep


def measure_variant(target: Target, factors: Sequence[float], say: Say) -> None:
    """Profile the engine, then measure every shape; ``variant.json`` says how it went."""
    started = time.monotonic()
    record: dict[str, Any] = {
        "variant": target.variant,
        "about": target.about,
        "shapes": [s.name for s in target.shapes],
        "factors": list(factors),
    }
    done = cmd.profile("--fleet", target.fleet, *target.profile_args, "--format", "json",
                       env=target.env)  # fmt: skip
    record["profile"] = {"exit": done.returncode, "wall_s": round(done.wall_s, 1)}
    say(f"{target.variant}: profile exit {done.returncode} in {done.wall_s:.0f} s")
    write_json(target.folder / "variant.json", record)
    if done.returncode != 0 or not target.store.is_file():
        (target.folder / "profile.log").write_text(done.brief(limit=100_000), encoding="utf-8")
        say(f"{target.variant}: no profile, no backtest\n{done.brief()}")
        return
    for shape in target.shapes:
        measure_shape(target, shape, factors, say)
    record["wall_s"] = round(time.monotonic() - started, 1)
    write_json(target.folder / "variant.json", record)


def measure_shape(target: Target, shape: Shape, factors: Sequence[float], say: Say) -> None:
    """Prepare, probe, predict (searches and rates, with and without the probe), then trials."""
    folder = target.folder / shape.name
    folder.mkdir(mode=0o700, exist_ok=False)
    started = time.monotonic()
    plan: dict[str, Any] = {
        "variant": target.variant,
        "shape": {"input_tokens": shape.input_tokens, "output_tokens": shape.output_tokens},
        "requests": REQUESTS,
        "attainment": ATTAINMENT,
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "rates": [],
    }
    keep = command_log(folder / "commands.log")
    done = keep(cmd.trial(
        "prepare", "--base", target.base, "--input-tokens", str(shape.input_tokens),
        "--output-tokens", str(shape.output_tokens), "--seed", str(TRIAL_SEED),
        "--out", str(folder / "workload"), env=target.env,
    ))  # fmt: skip
    if done.returncode != 0:
        say(f"{target.variant} {shape.name}: prepare failed\n{done.brief()}")
        return
    probe = folder / "probe.json"
    done = keep(cmd.profile("--fleet", target.fleet, "--verify", target.store, "--out", probe,
                            env=target.env))  # fmt: skip
    if done.returncode not in (0, 3) or not probe.is_file():
        say(f"{target.variant} {shape.name}: the probe failed\n{done.brief()}")
        return
    prefill, decode = probe_factors(probe)
    profile = cmd.read_json(target.store)["profiles"][0]
    base_slo = slo_from_profile(profile, shape.input_tokens, shape.output_tokens)
    ttft, tpot = rescaled_slo(*base_slo, prefill, decode)
    plan["probe"] = {"exit": done.returncode, "prefill": prefill, "decode": decode}
    plan["slo_profile"] = {"ttft_s": str(base_slo[0]), "tpot_s": str(base_slo[1])}
    plan["ttft_s"], plan["tpot_s"] = str(ttft), str(tpot)
    say(
        f"{target.variant} {shape.name}: probe prefill x{prefill:.3f}, decode x{decode:.3f}; "
        f"SLO TTFT ≤ {ttft} s, TPOT ≤ {tpot} s"
    )
    predict = Predictor(target, shape, folder, ttft, tpot, probe, keep)
    plan["searches"] = {f: predict.search(f) for f in FORECASTS}
    search = cmd.read_json(folder / plan["searches"]["probe"])
    edge = (search.get("search") or {}).get("band", {}).get("pass_50")
    write_json(folder / "plan.json", plan)
    if edge is None:
        say(f"{target.variant} {shape.name}: no predicted edge ({plan['searches']['probe']})")
        return
    plan["edge"] = edge
    for k, factor in enumerate(factors):
        rate = round(edge * factor, 3)
        plan["rates"].append(
            {
                "factor": factor,
                "rate": rate,
                "predictions": {f: predict.at(k, rate, f) for f in FORECASTS},
                "trial": f"trial-{k}-rate-{rate:g}",
            }
        )
    write_json(folder / "plan.json", plan)
    say(f"{target.variant} {shape.name}: edge {edge:g}/s; trials at {len(factors)} rates")
    for entry in plan["rates"]:
        trial(target, shape, folder, entry, ttft, tpot, keep, say)
    plan["wall_s"] = round(time.monotonic() - started, 1)
    write_json(folder / "plan.json", plan)


def trial(
    target: Target,
    shape: Shape,
    folder: Path,
    entry: Mapping[str, Any],
    ttft: Decimal,
    tpot: Decimal,
    keep: Callable[[cmd.Done], cmd.Done],
    say: Say,
) -> None:
    """One trial of ``REQUESTS`` offers at the entry's rate, as the conformance tier runs it
    (``--max-lag`` ``MAX_LAG_S``, vLLM's drain gauges), into the entry's folder."""
    done = keep(cmd.trial(
        "run", "--base", target.base, "--workload", str(folder / "workload" / "workload.json"),
        "--rate", str(entry["rate"]), "--requests", str(REQUESTS), "--ttft", str(ttft),
        "--tpot", str(tpot), "--attainment", ATTAINMENT, "--max-lag", str(MAX_LAG_S),
        *(arg for gauge in DRAIN_GAUGES for arg in ("--drain-gauge", gauge)),
        "--out", str(folder / entry["trial"]), env=target.env,
    ))  # fmt: skip
    summary = folder / entry["trial"] / "summary.json"
    got = cmd.read_json(summary) if summary.is_file() else {}
    say(
        f"{target.variant} {shape.name}: trial at {entry['rate']:g}/s exit {done.returncode}, "
        f"{got.get('good')}/{got.get('requests')} good, schedule "
        f"{'valid' if got.get('client_schedule_valid') else 'INVALID'} ({done.wall_s:.0f} s)"
    )


def repredict(work: Path, say: Say) -> None:
    """Every search and rate prediction under ``work`` made again, in place, by the predictor
    installed now: the same profiles, probes, SLOs and rates (each variant's ``limits.json``, as
    its run gave it), so the trials already run score today's forecasts. Logged to each shape's
    ``repredict.log``."""
    for plan_path in sorted(work.glob("*/*/plan.json")):
        folder, variant = plan_path.parent, plan_path.parent.parent
        plan = json.loads(plan_path.read_text(encoding="utf-8"))
        limits = variant / "limits.json"
        target = Target(
            variant=plan["variant"], folder=variant, base="", fleet=variant / "fleet.json",
            limits=limits if limits.is_file() else None, profile_args=(), shapes=(), about="",
        )  # fmt: skip
        shape = Shape(**plan["shape"])
        ttft, tpot = Decimal(plan["ttft_s"]), Decimal(plan["tpot_s"])
        keep = command_log(folder / "repredict.log")
        predict = Predictor(target, shape, folder, ttft, tpot, folder / "probe.json", keep)
        for forecast in plan.get("searches", {}):
            predict.search(forecast)
        for k, entry in enumerate(plan["rates"]):
            for forecast in entry["predictions"]:
                predict.at(k, entry["rate"], forecast)
        say(f"{plan['variant']} {shape.name}: predicted again")


@dataclass(frozen=True)
class Predictor:
    """``predict`` for one shape at its SLO, each document kept in the shape's folder."""

    target: Target
    shape: Shape
    folder: Path
    ttft: Decimal
    tpot: Decimal
    probe: Path
    keep: Callable[[cmd.Done], cmd.Done]

    def search(self, forecast: str) -> str:
        """``--find-max-rate``; the document's file name."""
        return self._run(f"search-{forecast}.json", forecast, "--find-max-rate")

    def at(self, k: int, rate: float, forecast: str) -> str:
        """``--rate RATE``; the document's file name."""
        return self._run(f"rate-{k}-{forecast}.json", forecast, "--rate", str(rate))

    def _run(self, name: str, forecast: str, *mode: str) -> str:
        limits = () if self.target.limits is None else ("--limits", str(self.target.limits))
        calibrate = ("--calibrate", str(self.probe)) if forecast == "probe" else ()
        done = self.keep(cmd.trial(
            "predict", "--fleet", str(self.target.fleet), "--profiles", str(self.target.store),
            *limits, "--input-tokens", str(self.shape.input_tokens),
            "--output-tokens", str(self.shape.output_tokens), "--requests", str(REQUESTS),
            "--ttft", str(self.ttft), "--tpot", str(self.tpot), "--attainment", ATTAINMENT,
            "--json", *calibrate, *mode, env=self.target.env,
        ))  # fmt: skip
        if done.returncode in (0, 2):
            (self.folder / name).write_text(done.stdout, encoding="utf-8")
        else:  # refused (outside the profiled domain) or failed: scored as neither
            write_json(self.folder / name, {"refused": done.returncode, "why": done.stderr[-2000:]})
        return name
