"""Predictions checked against vLLM's own server: ``predict`` across the edge, then trials there.

From the variant's profile (its store and sidecar) and workload: a freshness probe of the engine
(``narwhal-profile --verify``), an SLO set from the profile and put where the probe found the
engine (TTFT at most twice the fitted idle TTFT, TPOT at most 1.5 times the fitted single-stream
TPOT, each times the probe's factor; 90 % attainment), ``predict --find-max-rate --calibrate
PROBE`` for the band, then at each of ``FACTORS`` times its 0.5 crossing ``predict --rate`` (with
the probe) and a trial of ``REQUESTS`` offers (``run``, with vLLM's drain gauges).

What it records in results.json (docs/conformance.md), and what ``EdgeCheck.claims`` checks (the
tests assert ``asserted_claims``: all but ``RECORDED_ONLY``):

- at ``LOW`` times the edge the predicted 5-95 % range is informative (at most ``MAX_WIDTH``
  wide) and meets the measured attainment's Wilson 95 % interval (the trial's own binomial
  sampling error; recorded only);
- at ``HIGH`` times the edge the pass probability is at most ``MAX_PASS_PROBABILITY`` and the
  trial misses;
- the measured edge (from the highest rate that passed to the lowest that missed, above it)
  meets the predicted band (from the 0.9 crossing to the 0.1 crossing; recorded only).

Beside each trial it records what the machine's CPUs did meanwhile (``_cpus.host_load``: seconds
busy and stolen per CPU), so that a trial the host slowed can be told from a wrong prediction;
after the last trial it probes the engine again (``probe_after``), so that how far the engine
moved while the trials ran is measured, not guessed.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from narwhal_fit import tpot_batch_context_s, ttft_quadratic_s
from narwhal_trial import wilson_interval

from . import _commands as cmd
from ._cpus import cpu_seconds, host_load
from ._suite import DRAIN_GAUGES, Suite, trial_args

FACTORS = (0.5, 0.9, 1.0, 1.1, 1.5)
#: The band's crossings, from the rate that passes 90 % of replications to the one passing 10 %.
BAND_KEYS = ("pass_90", "pass_50", "pass_10")
#: The rate, times the predicted edge, whose predicted range must be informative (and whether it
#: holds the measured attainment is recorded).
LOW = 0.5
#: The rate, times the predicted edge, that must be predicted and measured to miss.
HIGH = 1.5
#: The widest 5-95 % range that still says something, at ``LOW``.
MAX_WIDTH = 0.3
#: The highest pass probability a rate ``HIGH`` times the edge may have.
MAX_PASS_PROBABILITY = 0.1
#: The default server's ``--max-num-seqs``, given to ``predict`` in a limits file: beyond the
#: edge requests queue for a slot instead of growing the batch past the profiled concurrency.
MAX_NUM_SEQS = 8
REQUESTS = 60
ATTAINMENT = "0.9"
#: The trials' ``--max-lag`` (seconds; ``run``'s default is 0.05): see ``_trial``.
MAX_LAG_S = 0.25
TTFT_FACTOR = 2.0
TPOT_FACTOR = 1.5
#: Claims recorded in results.json but not asserted (docs/conformance.md, "The probe against the
#: trials"): on this host the engine moves after the probe by as much as the band is wide, and
#: slow patches of the host that no profile or probe saw doubled a few requests' TPOT at half
#: the edge, where the range is one point wide.
RECORDED_ONLY = frozenset({"low_range_holds", "edge_meets_band"})


@dataclass
class RateCheck:
    """One rate: what was predicted and what the trial measured."""

    rate: float
    predicted: dict[str, Any]
    good: int
    requests: int
    schedule_valid: bool
    exit: int
    #: Per CPU, seconds busy and stolen while the trial ran (``_cpus.host_load``).
    host: dict[str, dict[str, float]] | None = None

    @property
    def measured(self) -> float:
        """good / requests."""
        return self.good / self.requests

    @property
    def measured_interval(self) -> tuple[float, float]:
        """The Wilson 95 % interval of the measured attainment."""
        return wilson_interval(self.good, self.requests)

    @property
    def predicted_range(self) -> tuple[float, float]:
        """The predicted 5-95 % range of the attainment."""
        interval = self.predicted["attainment_interval"]
        return float(interval["low"]), float(interval["high"])

    @property
    def width(self) -> float:
        """How wide the predicted 5-95 % range is."""
        low, high = self.predicted_range
        return high - low

    @property
    def agrees(self) -> bool:
        """The measured interval meets the predicted range."""
        return meets_range(self.good, self.requests, *self.predicted_range)

    def figures(self) -> dict[str, Any]:
        """For results.json."""
        return {
            "rate": round(self.rate, 4),
            "measured": round(self.measured, 4),
            "measured_wilson": [round(v, 4) for v in self.measured_interval],
            "predicted": self.predicted["attainment"],
            "predicted_range": list(self.predicted_range),
            "predicted_width": round(self.width, 4),
            "pass_probability": self.predicted["pass_probability"],
            "spread_sources": self.predicted.get("spread_sources"),
            "schedule_valid": self.schedule_valid,
            "exit": self.exit,
            "agrees": self.agrees,
            "host": self.host,
        }

    def brief(self) -> str:
        """``1.673/s: 55/60 [0.82, 0.96], predicted [1.000, 1.000], pass probability 1.00``."""
        mlo, mhi = self.measured_interval
        plo, phi = self.predicted_range
        return (
            f"{self.rate:g}/s: {self.good}/{self.requests} [{mlo:.2f}, {mhi:.2f}], predicted "
            f"[{plo:.3f}, {phi:.3f}], pass probability {self.predicted['pass_probability']:.2f}"
        )


@dataclass
class EdgeCheck:
    """The whole check: SLO, band, one entry per rate, every command run."""

    ttft_s: Decimal
    tpot_s: Decimal
    band: dict[str, Any]
    rates: list[RateCheck] = field(default_factory=list)
    #: The prediction's ``inputs`` (the files, and each engine's settings and mixing model).
    inputs: dict[str, Any] = field(default_factory=dict)
    #: The predicted edge (the band's 0.5 crossing) the rates are factors of.
    edge: float = 0.0
    #: The prediction's ``probe``: each engine's drift as the freshness probe measured it.
    probe: dict[str, Any] | None = None
    #: The probe's prefill and decode factors once more, after the last trial.
    probe_after: tuple[float, float] | None = None
    #: The factors of the predicted edge the rates were (``FACTORS`` unless given).
    factors: tuple[float, ...] = FACTORS
    done: list[cmd.Done] = field(default_factory=list)

    @property
    def attainment(self) -> float:
        """The target."""
        return float(ATTAINMENT)

    def measured_edge(self) -> tuple[float, float]:
        """The measured edge of these trials (``measured_edge``)."""
        return measured_edge([(r.rate, r.measured) for r in self.rates], self.attainment)

    def edge_agrees(self) -> bool:
        """The measured edge meets the predicted band [pass_90, pass_10]."""
        return edge_meets_band(self.measured_edge(), self.band)

    def figures(self) -> dict[str, Any]:
        """For results.json."""
        lo, hi = self.measured_edge()
        after = self.probe_after
        return {
            "ttft_s": str(self.ttft_s),
            "tpot_s": str(self.tpot_s),
            "attainment": ATTAINMENT,
            "requests": REQUESTS,
            "band": {k: self.band[k] for k in (*BAND_KEYS, "replications")},
            "rates": [r.figures() for r in self.rates],
            "measured_edge": [lo, None if hi == float("inf") else hi],
            "edge_agrees": self.edge_agrees(),
            "engines": self.inputs.get("engines"),
            "probe": self.probe,
            "probe_after": None if after is None else {"prefill": after[0], "decode": after[1]},
            "claims": self.claims(),
        }

    def brief(self) -> str:
        """One line for a failed assertion: the claims, the SLO, the band and every rate."""
        b = self.band
        band = " / ".join("-" if b[k] is None else f"{b[k]:.2f}" for k in BAND_KEYS)
        rates = "; ".join(r.brief() for r in self.rates)
        return (
            f"claims {self.claims()}; SLO TTFT {self.ttft_s} s TPOT {self.tpot_s} s; band "
            f"{band} req/s; {rates}"
        )

    def at(self, factor: float) -> RateCheck:
        """The rate ``factor`` times the predicted edge."""
        return self.rates[self.factors.index(factor)]

    def asserted_claims(self) -> dict[str, bool]:
        """The claims the tier asserts: all but ``RECORDED_ONLY``."""
        return {k: v for k, v in self.claims().items() if k not in RECORDED_ONLY}

    def claims(self) -> dict[str, bool]:
        """What the probe-calibrated prediction claims, each checked against the trials: at
        ``LOW`` an informative range holding the measured attainment; at ``HIGH`` a predicted and
        a measured miss; the measured edge inside the predicted band."""
        low, high = self.at(LOW), self.at(HIGH)
        return {
            "low_range_informative": low.width <= MAX_WIDTH,
            "low_range_holds": low.agrees,
            "high_predicted_miss": high.predicted["pass_probability"] <= MAX_PASS_PROBABILITY,
            "high_measured_miss": high.measured < self.attainment,
            "edge_meets_band": self.edge_agrees(),
        }


def meets_range(good: int, requests: int, low: float, high: float) -> bool:
    """The Wilson 95 % interval of ``good / requests`` meets the predicted range [low, high]."""
    mlo, mhi = wilson_interval(good, requests)
    return mlo <= high and low <= mhi


def measured_edge(points: Iterable[tuple[float, float]], target: float) -> tuple[float, float]:
    """From (rate, measured attainment) pairs: the highest passing rate below the lowest missing
    one, and that lowest missing rate; 0 and infinity where there is none."""
    pairs = list(points)
    lowest_miss = min((r for r, a in pairs if a < target), default=float("inf"))
    passed = (r for r, a in pairs if a >= target and r < lowest_miss)
    return max(passed, default=0.0), lowest_miss


def edge_meets_band(edge: tuple[float, float], band: Mapping[str, Any]) -> bool:
    """The measured edge meets the predicted band [pass_90, pass_10]."""
    b90, b10 = band["pass_90"], band["pass_10"]
    return b90 is not None and b10 is not None and edge[0] <= b10 and b90 <= edge[1]


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
    ttft: Decimal, tpot: Decimal, prefill: float, decode: float
) -> tuple[Decimal, Decimal]:
    """The SLO times the engine's prefill and decode factors (the engine as it runs now)."""
    return Decimal(f"{float(ttft) * prefill:.4f}"), Decimal(f"{float(tpot) * decode:.5f}")


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
    relative to the engine as the probe found it (a CI run's engine, 10-25 % slower than its
    profile, otherwise met the TPOT bound at no rate: no edge to check)."""
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
