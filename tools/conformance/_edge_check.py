"""Predictions checked against vLLM's own server: ``predict`` across the edge, then trials there.

From the variant's profile (its store and sidecar) and workload: a freshness probe of the engine
(``narwhal-profile --verify``), an SLO set from the profile and put where the probe found the
engine (TTFT at most twice the fitted idle TTFT, TPOT at most 1.5 times the fitted single-stream
TPOT, each times the probe's factor as the prediction believes it: raised to ``predict``'s default
probe weight; 90 % attainment), ``predict --find-max-rate --calibrate
PROBE`` for the band, then at each of ``FACTORS`` times its 0.5 crossing ``predict --rate`` (with
the probe) and a trial of ``REQUESTS`` offers (``run``, with vLLM's drain gauges).
``_edge_claims`` holds what is claimed and checked against those trials.

Beside each trial it records what the machine's CPUs did meanwhile (``_cpus.host_load``: seconds
busy and stolen per CPU), so that a trial the host slowed can be told from a wrong prediction;
after the last trial it probes the engine again (``probe_after``), so that how far the engine
moved while the trials ran is measured, not guessed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from decimal import Decimal
from pathlib import Path
from typing import Any

from narwhal_fit import tpot_batch_context_s, ttft_quadratic_s
from narwhal_trial import DEFAULT_PROBE_WEIGHT

from . import _commands as cmd
from ._cpus import cpu_seconds, host_load
from ._edge_claims import ATTAINMENT, FACTORS, REQUESTS, EdgeCheck, RateCheck
from ._suite import DRAIN_GAUGES, Suite, trial_args

#: The default server's ``--max-num-seqs``, given to ``predict`` in a limits file: beyond the
#: edge requests queue for a slot instead of growing the batch past the profiled concurrency.
MAX_NUM_SEQS = 8
#: The trials' ``--max-lag`` (seconds; ``run``'s default is 0.05): see ``_trial``.
MAX_LAG_S = 0.25
TTFT_FACTOR = 2.0
TPOT_FACTOR = 1.5


def slo_from_profile(
    profile: Mapping[str, Any],
    n_in: int,
    n_out: int,
    ttft_factor: float = TTFT_FACTOR,
    tpot_factor: float = TPOT_FACTOR,
) -> tuple[Decimal, Decimal]:
    """The SLO from a stored profile: ``ttft_factor`` times its fitted idle TTFT at ``n_in``
    tokens, ``tpot_factor`` times its fitted single-stream TPOT."""
    ttft = ttft_quadratic_s(profile["prefill_fit"]["coefficients"], n_in)
    tpot = tpot_batch_context_s(profile["decode_fit"]["coefficients"], 1, n_in + n_out / 2)
    return Decimal(f"{ttft * ttft_factor:.4f}"), Decimal(f"{tpot * tpot_factor:.5f}")


def rescaled_slo(
    ttft: Decimal,
    tpot: Decimal,
    prefill: float,
    decode: float,
    weight: float = DEFAULT_PROBE_WEIGHT,
) -> tuple[Decimal, Decimal]:
    """The SLO times the engine's prefill and decode factors raised to ``weight`` (the engine as
    ``predict --calibrate PROBE`` believes it runs now; 1: as the probe found it)."""
    return (
        Decimal(f"{float(ttft) * prefill**weight:.4f}"),
        Decimal(f"{float(tpot) * decode**weight:.5f}"),
    )


def slo(suite: Suite) -> tuple[Decimal, Decimal]:
    """The SLO from the variant's profile and its workload's shape."""
    return slo_from_profile(suite.profile_doc(), suite.shape.trial_input, suite.shape.trial_output)


def write_limits(folder: Path, name: str = "limits.json", **engine: Any) -> Path:
    """A limits file for the one engine (``vllm-0``) at ``folder/name``: ``max_num_seqs`` is the
    server's (``MAX_NUM_SEQS``) unless given, and any other key as given."""
    path = folder / name
    doc = {
        "format": "narwhal.limits",
        "format_version": 1,
        "engines": {"vllm-0": {"max_num_seqs": MAX_NUM_SEQS, **engine}},
    }
    path.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    return path


def _predict(suite: Suite, limits: Path, ttft: Decimal, tpot: Decimal, *extra: str) -> cmd.Done:
    return cmd.trial(
        "predict", "--fleet", str(suite.fleet), "--profiles", str(suite.store),
        "--limits", str(limits),
        "--input-tokens", str(suite.shape.trial_input),
        "--output-tokens", str(suite.shape.trial_output), "--requests", str(REQUESTS),
        "--ttft", str(ttft), "--tpot", str(tpot), "--attainment", ATTAINMENT, "--json", *extra,
        env=suite.env,
    )  # fmt: skip


def _trial(suite: Suite, out: Path, rate: float, ttft: Decimal, tpot: Decimal) -> cmd.Done:
    """A ``REQUESTS``-offer trial at ``rate``; ``--max-lag`` ``MAX_LAG_S``: the tier shares its
    two CPUs with vLLM's spinning engine (and in CI with two busy loops), and a 92 ms stall of the
    client's loop once made one offer of a 60-offer trial late by the default 50 ms."""
    gauges = [arg for gauge in DRAIN_GAUGES for arg in ("--drain-gauge", gauge)]
    run = cmd.trial(
        "run", *trial_args(suite.server), "--workload", str(suite.workload),
        "--rate", str(rate), "--requests", str(REQUESTS), "--ttft", str(ttft),
        "--tpot", str(tpot), "--attainment", ATTAINMENT, "--max-lag", str(MAX_LAG_S), *gauges,
        "--out", str(out), env=suite.env,
    )  # fmt: skip
    assert run.returncode in (0, 2), run.brief()
    return run


def run_probe(suite: Suite, folder: Path, name: str = "probe.json") -> tuple[Path, cmd.Done]:
    """``narwhal-profile --verify``: the engine re-measured at a few of its profile's points (exit
    0, or 3 when it drifted past the threshold: the probe is written either way)."""
    out = folder / name
    done = cmd.profile(
        "--fleet", suite.fleet, "--verify", suite.store, "--out", out, env=suite.env
    )  # fmt: skip
    assert done.returncode in (0, 3), done.brief()
    return out, done


def probe_factors(probe: Path) -> tuple[float, float]:
    """The probe's prefill and decode factors of the one engine."""
    engine = cmd.read_json(probe)["engines"]["vllm-0"]
    return engine["prefill"]["factor"], engine["decode"]["factor"]


def run_edge_check(suite: Suite, folder: Path, factors: tuple[float, ...] = FACTORS) -> EdgeCheck:
    """Probe the engine, predict the band with the probe, then predict and measure each rate
    (``factors`` times the predicted edge); keep every command.

    The SLO moves with the engine: drawn from the profile's speed, it is put at the same place
    relative to the engine as the prediction believes the probe (a CI run's engine, 10-25 %
    slower than its profile, otherwise met the TPOT bound at no rate: no edge to check)."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    probe, probed = run_probe(suite, folder)
    ttft, tpot = rescaled_slo(*slo(suite), *probe_factors(probe))
    limits = write_limits(suite.root)
    calibrated = ("--calibrate", str(probe))
    found = _predict(suite, limits, ttft, tpot, "--find-max-rate", *calibrated)
    assert found.returncode in (0, 2), found.brief()
    doc = json.loads(found.stdout)
    search = doc["search"]
    check = EdgeCheck(
        ttft, tpot, search["band"], done=[probed, found], inputs=doc["inputs"], factors=factors
    )
    check.probe = doc.get("probe")
    edge = search["band"]["pass_50"]
    assert edge is not None, found.brief()
    check.edge = edge
    for k, factor in enumerate(factors):
        rate = round(edge * factor, 3)
        predicted = _predict(suite, limits, ttft, tpot, "--rate", str(rate), *calibrated)
        check.done.append(predicted)
        assert predicted.returncode in (0, 2), predicted.brief()
        out = folder / f"trial-{k}-rate-{rate:g}"
        before = cpu_seconds()
        run = _trial(suite, out, rate, ttft, tpot)
        host = host_load(before, cpu_seconds())
        check.done.append(run)
        summary = cmd.read_json(out / "summary.json")
        check.rates.append(
            RateCheck(
                rate=rate,
                predicted=json.loads(predicted.stdout)["prediction"],
                good=int(summary["good"]),
                requests=int(summary["requests"]),
                schedule_valid=bool(summary["client_schedule_valid"]),
                exit=run.returncode,
                host=host,
            )
        )
    after, probed_after = run_probe(suite, folder, "probe-after.json")
    check.done.append(probed_after)
    check.probe_after = probe_factors(after)
    return check
