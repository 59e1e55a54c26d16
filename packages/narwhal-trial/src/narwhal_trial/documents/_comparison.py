"""The ``compare`` document (``narwhal.trial.comparison``): two sides' facts, what differs between
their manifests, and a verdict per measure, each with its interval and the smallest difference
the samples could have detected. Every difference is B minus A."""

from __future__ import annotations

from typing import Final, Literal

from pydantic import Field

from narwhal_store import ClosedModel

COMPARISON_FORMAT: Final = "narwhal.trial.comparison"

Verdict = Literal["better", "worse", "no detectable difference"]
"""B against A: ``better``/``worse`` when the interval excludes no change, at the confidence."""
SideKind = Literal["run", "edge", "runs"]


class SideFacts(ClosedModel):
    """One side as read: a run folder, an edge folder, or a folder of run folders."""

    path: str
    kind: SideKind
    runs: list[str] = Field(description="each run folder's run id, in the order read")
    rates: list[float] = Field(description="each run's offered rate, request/s")


class Difference(ClosedModel):
    """One fact the two sides' manifests (or edge documents) disagree on."""

    what: str
    a: str | None
    b: str | None


class ProportionVerdict(ClosedModel):
    """Attainment: the difference of the good fractions, with Newcombe's interval."""

    good_a: int
    requests_a: int
    good_b: int
    requests_b: int
    difference: float = Field(description="good_b / requests_b - good_a / requests_a")
    low: float
    high: float
    detectable: float = Field(
        description="the smallest difference these sample sizes detect with 80 % power"
    )
    verdict: Verdict


class ShiftVerdict(ClosedModel):
    """A latency quantile's shift (seconds), with a bootstrap interval over requests."""

    measure: Literal["ttft", "tpot"]
    quantile: Literal[50, 99]
    count_a: int
    count_b: int
    a_s: float
    b_s: float
    difference_s: float
    low_s: float
    high_s: float
    detectable_s: float = Field(
        description="the smallest shift these sample sizes detect with 80 % power"
    )
    verdict: Verdict = Field(description="a shift up (slower) is worse")


class RatePair(ClosedModel):
    """Two runs, one a side, and their verdicts: at the same offered load when the sides are sets
    or edges; two single runs are paired whatever their rates (``differences`` says so)."""

    rate_a: float = Field(description="A's offered request/s (a scheduled workload's mean)")
    rate_b: float
    speedup_a: float | None
    speedup_b: float | None
    run_a: str
    run_b: str
    attainment: ProportionVerdict
    latency: list[ShiftVerdict]


class EdgeVerdict(ClosedModel):
    """Two measured edges: B is better when its highest pass is at or above A's lowest miss,
    worse when A's highest pass is at or above B's lowest miss; brackets that overlap (or a
    missing end) tell no difference."""

    a_highest_pass: float | None
    a_lowest_miss: float | None
    b_highest_pass: float | None
    b_lowest_miss: float | None
    verdict: Verdict
    reason: str


class FitChange(ClosedModel):
    """One engine's fitted latency in B against A at one point of the profiled domain."""

    engine: str
    phase: Literal["prefill", "decode"]
    at: str = Field(description="the point: '8192 tokens', or 'concurrency 16 at 8192 tokens'")
    a_s: float
    b_s: float
    ratio: float = Field(description="b_s / a_s")
    low: float = Field(description="the ratio's interval from the raw samples' spread")
    high: float
    verdict: Verdict = Field(description="a ratio above 1 (slower) is worse")


class Comparison(ClosedModel):
    """``comparison.json``: what ``compare A B`` found."""

    format: Literal["narwhal.trial.comparison"] = COMPARISON_FORMAT
    format_version: Literal[1] = 1
    generator: str = Field(description="narwhal-trial <version>")
    created: str = Field(description="UTC wall-clock time of the comparison (ISO 8601)")
    confidence: float
    seed: int = Field(description="seed of the bootstrap resamples (same seed, same intervals)")
    a: SideFacts
    b: SideFacts
    workloads_differ: bool = Field(description="allowed by --allow-different-workloads")
    differences: list[Difference]
    pairs: list[RatePair] = Field(description="runs paired by offered load, lowest first")
    edge: EdgeVerdict | None = Field(description="null unless both sides are edge folders")
    profiles: list[FitChange] | None = Field(description="null without --profiles")
    worse: list[str] = Field(description="each measure that got worse, in words")
    exit_code: int = Field(description="0: nothing got worse; 2: something did")
