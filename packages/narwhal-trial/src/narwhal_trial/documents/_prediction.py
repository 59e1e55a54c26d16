"""The ``predict`` document (``narwhal.trial.prediction``) and its text summary."""

from __future__ import annotations

from typing import Final, Literal

from pydantic import Field

from narwhal_trial.documents._prediction_capacity import (
    BoundMiss,
    SustainableRate,
    bound_lines,
    sustainable_lines,
)
from narwhal_trial.documents._prediction_inputs import CalibrationDoc as CalibrationDoc
from narwhal_trial.documents._prediction_inputs import EngineSettings as EngineSettings
from narwhal_trial.documents._prediction_inputs import Inputs as Inputs
from narwhal_trial.documents._prediction_inputs import ProbeFactor, ProbeUse
from narwhal_trial.documents._prediction_schedule import (
    PredictedBucket,
    bucket_lines,
    omitted_when_none,
    pace_label,
    workload_lines,
)
from narwhal_trial.documents._prediction_spread import SpreadSources, spread_line
from narwhal_trial.documents._records import AliasedDoc, Distribution

PREDICTION_FORMAT: Final = "narwhal.trial.prediction"


class AttainmentInterval(AliasedDoc):
    """How far the attainment may move: across Monte Carlo replications, or (one replication) with
    every fit off by its worst relative residual."""

    method: Literal["monte-carlo", "fit-residuals", "bound"] = Field(
        description="monte-carlo: the 5th and 95th percentile of the replications' attainment; "
        "fit-residuals: low with every fit scaled up by its worst-point relative error, high "
        "scaled down by it; bound: 0 to the most the throughput bound leaves good"
    )
    low: float
    high: float


class EngineUse(AliasedDoc):
    """What the virtual fleet asked of one engine."""

    iid: str
    role: str
    device: str = Field(description="the virtual device (GPU group, or the engine alone)")
    served: int = Field(description="requests this engine streamed to the client")
    prefilled: int = Field(description="split requests this engine prefilled")
    max_decoding: int = Field(description="most sequences decoding in one step")
    decode_domain_max: int | None = Field(description="highest profiled decode concurrency")


class RatePrediction(AliasedDoc):
    """The predicted outcome of one trial at one rate (a scheduled workload's: at one speedup)."""

    rate: float = Field(description="offered requests per second (a scheduled workload's mean)")
    speedup: float | None = omitted_when_none(
        "a scheduled workload: its time axis divided by this (absent for the runbook's)"
    )
    replications: int = Field(description="1: the fits alone (deterministic)")
    good: int = Field(description="the median over replications")
    required_good: int
    attainment: float = Field(description="good / requests")
    attainment_interval: AttainmentInterval
    spread_sources: SpreadSources | None = omitted_when_none(
        "with replications above 1 inside the profiled domain: each source of spread's share of "
        "attainment_interval (absent with one replication and with bound)"
    )
    pass_probability: float = Field(
        description="the share of replications with good ≥ required_good (0 or 1 with one)"
    )
    passed: bool = Field(alias="pass", description="pass_probability ≥ 0.5")
    pass_interval: tuple[bool, bool] = Field(
        description="the verdict at the interval's low and high ends"
    )
    schedule_misses: int = Field(
        description="offers due while --max-in-flight requests were in flight: the trial would "
        "record them as client_schedule_miss and report client_schedule_valid false"
    )
    ttft_s: Distribution | None = Field(
        description="over the requests sent, in every replication (null with bound)"
    )
    tpot_s: Distribution | None = Field(
        description="over the requests sent, in every replication (null with bound)"
    )
    engines: list[EngineUse] = Field(description="empty with bound")
    buckets: list[PredictedBucket] | None = omitted_when_none(
        "a scheduled workload: the predicted attainment per power-of-two input-length bucket "
        "(only those holding a request)"
    )
    bound: BoundMiss | None = omitted_when_none(
        "a miss the throughput bound shows beyond the profiled concurrency: good is the most "
        "requests that can be good, and no latency is predicted"
    )


class EdgeBand(AliasedDoc):
    """The edge as a band: the highest rates (a scheduled workload's: speedups) whose predicted
    probability of passing is at least 0.9, 0.5 and 0.1 (``pass_50`` is the highest passing one as
    the trial would judge it)."""

    pass_90: float | None = Field(description="null when no rate tried passes that often")
    pass_50: float | None
    pass_10: float | None
    replications: int = Field(description="Monte Carlo replications behind each probability")
    curve: list[tuple[float, float]] = Field(
        description="(rate, pass probability) at every rate the search simulated"
    )


class RateSearch(AliasedDoc):
    """``--find-max-rate``: the highest rate predicted to pass (a scheduled workload's: the
    highest speedup, ``axis`` speedup; ``tried`` and ``band`` are then speedups)."""

    max_rate: float | None = Field(
        description="null when even the lowest rate tried misses (a scheduled workload: the mean "
        "rate at max_speedup)"
    )
    max_speedup: float | None = omitted_when_none(
        "a scheduled workload: the highest speedup predicted to pass (absent for the runbook's)"
    )
    axis: Literal["speedup"] | None = omitted_when_none(
        "speedup: the search moved a scheduled workload's speedup, and tried, band and curve "
        "hold speedups (absent: rates)"
    )
    at_max: RatePrediction | None
    limited_by: Literal["target", "profile domain"] = Field(
        description="target: the next rate up misses; profile domain: the next rate up needs a "
        "decode batch beyond the profiled concurrency, so nothing above is predicted"
    )
    detail: str
    tried: list[tuple[float, str]] = Field(
        description="(rate, pass | miss | miss (bound) | outside domain)"
    )
    band: EdgeBand
    sustainable: SustainableRate | None = omitted_when_none(
        "the highest rate the fleet keeps up with for as long as a trial lasts, beside the "
        "trial-sized max_rate (absent when the search found no passing rate)"
    )


class Prediction(AliasedDoc):
    """``narwhal.trial.prediction``: a trial predicted from the profiles, before it runs."""

    format: Literal["narwhal.trial.prediction"] = PREDICTION_FORMAT
    format_version: Literal[5] = 5
    generator: str = Field(description="narwhal-trial <version>")
    inputs: Inputs
    calibration: CalibrationDoc | None = Field(
        default=None, description="with --calibrate RUN: the correction, and whether it is applied"
    )
    probe: ProbeUse | None = omitted_when_none(
        "with --calibrate PROBE: the freshness probe each engine's speed came from"
    )
    prediction: RatePrediction | None = Field(description="at --rate; null without it")
    search: RateSearch | None = Field(description="with --find-max-rate")


def _rate(value: float | None, unit: str = "/s") -> str:
    return "none" if value is None else f"{value:.4g}{unit}"


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 1000:.1f} ms"


def rate_lines(p: RatePrediction, ttft_s: str = "", tpot_s: str = "") -> list[str]:
    """A few lines about one predicted rate (``ttft_s``/``tpot_s``: the bounds, for a bounded
    miss)."""
    lo, hi = p.attainment_interval.low, p.attainment_interval.high
    if p.bound is not None:
        return [
            f"{pace_label(p.rate, p.speedup)}: at most {p.good} good (need {p.required_good}), "
            f"attainment at most {hi:.3f} -> MISS (bound)",
            *bound_lines(p.bound, ttft_s, tpot_s),
            *([] if p.buckets is None else bucket_lines(p.buckets)),
        ]
    verdict = "PASS" if p.passed else "MISS"
    if p.replications > 1:
        verdict += f" (pass probability {p.pass_probability:.2f})"
    elif p.pass_interval[0] != p.pass_interval[1]:
        verdict += " (borderline: the fits' residuals span the target)"
    if p.schedule_misses:
        verdict += (
            f"; {p.schedule_misses} offers beyond --max-in-flight: the client's schedule would be "
            "invalid"
        )
    lines = [
        f"{pace_label(p.rate, p.speedup)}: predicted {p.good} good (need {p.required_good}), "
        "attainment "
        f"{p.attainment:.3f} [{lo:.3f}, {hi:.3f}] -> {verdict}",
        *([] if p.spread_sources is None else [spread_line(p.spread_sources)]),
        _latency_line(p.ttft_s, p.tpot_s),
    ]
    for e in p.engines:
        dom = "no decode fit" if e.decode_domain_max is None else f"≤ {e.decode_domain_max}"
        lines.append(
            f"  {e.iid} ({e.role}, device {e.device}): served {e.served}, prefilled "
            f"{e.prefilled}, decode batch up to {e.max_decoding} (profiled {dom})"
        )
    if p.buckets is not None:
        lines += bucket_lines(p.buckets)
    return lines


def _latency_line(ttft: Distribution | None, tpot: Distribution | None) -> str:
    if ttft is None or tpot is None:
        return "  no latencies predicted"
    return (
        f"  TTFT p50 {_ms(ttft.p50)} p99 {_ms(ttft.p99)} max {_ms(ttft.max)}; "
        f"TPOT p50 {_ms(tpot.p50)} p99 {_ms(tpot.p99)} max {_ms(tpot.max)}"
    )


def _drift(phase: str, f: ProbeFactor | None) -> str:
    if f is None:
        return f"{phase} not probed (the sweep's own speed)"
    return f"{phase} x{f.factor:.3f} [{f.low:.3f}, {f.high:.3f}]"


def probe_lines(p: ProbeUse) -> list[str]:
    """Which probe the engines' speed came from, and each engine's drift."""
    lines = [f"engine speed from the probe {p.probe} ({p.created_at}), APPLIED to this prediction"]
    for iid in p.prefill:
        past = f", past the {p.threshold:.0%} threshold" if iid in p.drifted else ""
        lines.append(
            f"  {iid}: {_drift('prefill', p.prefill[iid])}, {_drift('decode', p.decode[iid])}{past}"
        )
    return lines


def render_text(doc: Prediction) -> str:
    """The text summary ``predict`` prints."""
    i = doc.inputs
    how = (
        "the fits alone (--replications 1), interval from the fits' worst residuals"
        if i.replications == 1
        else f"{i.replications} replications (seed {i.seed}) of the profiles' spread, "
        "median attainment [5th, 95th percentile]"
    )
    w = i.workload
    shape = (
        f"{i.requests} requests of {i.input_tokens} in / {i.output_tokens} out"
        if w is None or w.source == "runbook"
        else f"{i.requests} requests of their own lengths (longest {i.input_tokens} in / "
        f"{i.output_tokens} out)"
    )
    lines = [
        f"predicted from {i.profiles} for {shape}, TTFT ≤ {i.ttft_s} s, TPOT ≤ {i.tpot_s} s, "
        f"attainment {i.attainment}",
        *([] if w is None else workload_lines(w)),
        f"model: {how}",
    ]
    for iid, e in i.engines.items():
        seqs = "unbounded" if e.max_num_seqs is None else str(e.max_num_seqs)
        lines.append(
            f"  {iid}: budget {e.max_num_batched_tokens} tokens ({e.max_num_batched_tokens_source}"
            f"), chunked prefill {'on' if e.chunked_prefill else 'off'} "
            f"({e.chunked_prefill_source}), max_num_seqs {seqs} ({e.max_num_seqs_source})"
        )
        lines.append(f"  {iid}: mixing {e.mixing_detail}")
    for difference in i.frontend_differences:
        lines.append(f"  WARNING {difference}: the profile was measured under other settings")
    c = doc.calibration
    if c is not None:
        used = "APPLIED to this prediction" if c.applied else "not applied: --apply-calibration"
        lines.append(
            f"calibration from {c.run} ({c.requests} requests at {c.rate:g}/s): measured TTFT p50 "
            f"{_ms(c.measured_ttft_p50_s)}, TPOT p50 {_ms(c.measured_tpot_p50_s)}; predicted "
            f"{_ms(c.predicted_ttft_p50_s)}, {_ms(c.predicted_tpot_p50_s)} -> prefill x"
            f"{c.prefill_factor:.3f}, decode x{c.decode_factor:.3f} ({used})"
        )
    if doc.probe is not None:
        lines += probe_lines(doc.probe)
    if doc.prediction is not None:
        lines += rate_lines(doc.prediction, str(i.ttft_s), str(i.tpot_s))
    if doc.search is not None:
        s = doc.search
        axis, unit = ("speedup", "x") if s.axis == "speedup" else ("rate", "/s")
        if s.max_rate is None:
            lines.append(f"highest passing {axis}: none found ({s.detail})")
        else:
            best = (
                f"{s.max_rate:g}/s"
                if s.max_speedup is None
                else f"{s.max_speedup:g}x (mean {s.max_rate:.4g}/s)"
            )
            short = s.sustainable is not None and s.sustainable.trial_too_short
            trial = f"for a trial of {i.requests} requests" + (
                ", too short to test capacity" if short else ""
            )
            lines.append(
                f"highest passing {axis}: {best} {trial} (limited by the {s.limited_by}: "
                f"{s.detail})"
            )
            b = s.band
            if b.replications > 1:
                lines.append(
                    f"edge band ({i.requests}-request trials): pass probability ≥ 0.9 up to "
                    f"{_rate(b.pass_90, unit)}, ≥ 0.5 "
                    f"up to {_rate(b.pass_50, unit)}, ≥ 0.1 up to {_rate(b.pass_10, unit)}"
                )
            if s.sustainable is not None:
                lines += sustainable_lines(s.sustainable, s.max_rate, i.requests)
            if s.at_max is not None:
                lines += rate_lines(s.at_max, str(i.ttft_s), str(i.tpot_s))
    return "\n".join(lines)
