"""The freshness probe's arithmetic (``--verify``, docs/design.md §18): which of a profile's points
it re-measures, the profile's timing at each, and each phase's drift with its interval.

The points come from the profile's own sweep (its sidecar ``settings``): the shortest, the middle
and the longest prefill length; one decode input length (the profiled one nearest the middle of
their range) at concurrency 1 and at the profiled concurrency nearest the geometric middle of the
profiled ones. The reference at a point is the median of the profile's raw samples there (TTFTs;
valid cohorts' TPOTs), else the profile's fit (a decode fit at the probe cohort's context). Each
repeat's factor is its timing over the reference; a phase's drift is the median factor, with the
5-95 % percentile interval of that median over bootstrap resamples of the factors.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from narwhal_fit import DECODE_FORM, PREFILL_FORM, tpot_batch_context_s, ttft_quadratic_s
from narwhal_profile_cli._errors import ProfileAbortError, ProfileUsageError
from narwhal_profile_cli.sweeps._decode import Cohort
from narwhal_profile_cli.sweeps._prefill import PrefillTimings
from narwhal_store import (
    DriftFactor,
    EngineDrift,
    ProbePoint,
    Profile,
    ProfileSamples,
    SweepSettings,
)

PREFILL_REPEATS = 3
"""Requests at each probed prefill length."""
DECODE_REPEATS = 3
"""Cohorts at each probed decode point."""
RESAMPLES = 2000
"""Bootstrap resamples of a phase's factors."""
SEED = "narwhal-probe"
"""The bootstrap's seed: the same factors always give the same interval."""
INTERVAL = (0.05, 0.95)
"""The percentiles of the bootstrap medians that bound a drift's interval."""


@dataclass(frozen=True, slots=True)
class ProbePlan:
    """The points one engine's probe measures, all taken from its profile's sweep."""

    prefill_lens: tuple[int, ...]
    decode_input_len: int
    concurrencies: tuple[int, ...]
    decode_tokens: int


@dataclass(frozen=True, slots=True)
class Reference:
    """The profile's timing at one point, and where it came from."""

    seconds: float
    kind: Literal["samples", "fit"]


def probe_plan(iid: str, settings: SweepSettings) -> ProbePlan:
    """The probe's points from the profile's sweep settings (a usage error when the profile has
    no decode point to probe)."""
    lens = sorted(set(settings.prefill_lens))
    inputs = sorted(set(settings.decode_input_lens))
    levels = sorted(set(settings.decode_concurrency))
    if not inputs or not levels:
        raise ProfileUsageError(
            f"engine {iid}: its profile's sweep has no decode point to probe "
            f"(decode input lengths {inputs}, concurrencies {levels})",
            engine=iid,
            code="no_profile",
        )
    prefill = tuple(sorted({lens[0], lens[(len(lens) - 1) // 2], lens[-1]}))
    middle = (inputs[0] + inputs[-1]) / 2
    input_len = min(inputs, key=lambda n: (abs(n - middle), n))  # a tie: the shorter, cheaper
    geometric = math.sqrt(levels[0] * levels[-1])
    others = [n for n in levels if n != 1] or levels
    # nearest in log terms; a tie: the larger, so the cohort differs from the single stream
    mid = min(others, key=lambda n: (abs(math.log(n / geometric)), -n))
    return ProbePlan(prefill, input_len, tuple(sorted({1, mid})), settings.decode_tokens)


def prefill_reference(profile: Profile, samples: ProfileSamples, length: int) -> Reference | None:
    """The median of the profile's TTFTs at ``length``, else its prefill fit there."""
    ttfts = [t for s in samples.prefill_samples if s.length == length for t in s.ttft_s if t > 0]
    if ttfts:
        return Reference(statistics.median(ttfts), "samples")
    fit = profile.prefill_fit
    if fit.form == PREFILL_FORM:
        seconds = ttft_quadratic_s(fit.coefficients, length)
        if seconds > 0:
            return Reference(seconds, "fit")
    return None


def decode_reference(
    profile: Profile, samples: ProfileSamples, input_len: int, concurrency: int, ctx: float | None
) -> Reference | None:
    """The median TPOT of the profile's valid cohorts at ``(input_len, concurrency)``, else its
    decode fit at ``ctx`` (the probe cohorts' context; None: only whether a fit exists)."""
    tpots = [
        s.tpot_s
        for s in samples.decode_samples
        if s.valid
        and s.input_len == input_len
        and s.concurrency == concurrency
        and s.tpot_s is not None
        and s.tpot_s > 0
    ]
    if tpots:
        return Reference(statistics.median(tpots), "samples")
    fit = profile.decode_fit
    if fit is None or fit.form != DECODE_FORM:
        return None
    seconds = tpot_batch_context_s(fit.coefficients, concurrency, input_len if ctx is None else ctx)
    return Reference(seconds, "fit") if seconds > 0 else None


def check_references(
    iid: str, profile: Profile, samples: ProfileSamples, plan: ProbePlan, store: str
) -> None:
    """Refuse, before anything is measured, a point the profile holds no timing for."""
    missing = [
        f"prefill at {n} tokens"
        for n in plan.prefill_lens
        if prefill_reference(profile, samples, n) is None
    ]
    missing += [
        f"decode at input {plan.decode_input_len} x {n}"
        for n in plan.concurrencies
        if decode_reference(profile, samples, plan.decode_input_len, n, None) is None
    ]
    if missing:
        raise ProfileUsageError(
            f"engine {iid}: its profile in {store} holds neither samples nor a fit for "
            + ", ".join(missing),
            engine=iid,
            code="no_profile",
        )


def _quantile(ordered: Sequence[float], q: float) -> float:
    """The ``q`` quantile of ``ordered`` (ascending), interpolated between ranks."""
    position = q * (len(ordered) - 1)
    below = math.floor(position)
    above = min(below + 1, len(ordered) - 1)
    return ordered[below] + (ordered[above] - ordered[below]) * (position - below)


def drift_factor(factors: Sequence[float], threshold: float) -> DriftFactor:
    """The median factor, the 5-95 % percentile interval of the median over ``RESAMPLES``
    bootstrap resamples (seeded: the same factors give the same interval; widened to hold the
    median itself), and whether it is past ``threshold``."""
    values = list(factors)
    factor = statistics.median(values)
    rng = random.Random(SEED)
    medians = sorted(
        statistics.median(rng.choices(values, k=len(values))) for _ in range(RESAMPLES)
    )
    low, high = (_quantile(medians, q) for q in INTERVAL)
    return DriftFactor(
        factor=factor,
        low=min(low, factor),
        high=max(high, factor),
        repeats=len(values),
        drifted=abs(factor - 1) > threshold,
    )


def _prefill_points(
    profile: Profile, samples: ProfileSamples, measured: Sequence[PrefillTimings]
) -> list[ProbePoint]:
    points = []
    for timings in measured:
        reference = prefill_reference(profile, samples, timings.length)
        assert reference is not None  # check_references refused the profile otherwise
        points.append(_point("prefill", timings.length, 1, timings.ttft_s, reference))
    return points


def _decode_points(
    iid: str, profile: Profile, samples: ProfileSamples, cohorts: Sequence[Cohort]
) -> list[ProbePoint]:
    valid: dict[tuple[int, int], list[tuple[float, float]]] = {}
    for cohort in cohorts:
        point = cohort.point
        if point is not None and point.tpot_s > 0:
            key = (cohort.input_len, cohort.concurrency)
            valid.setdefault(key, []).append((point.tpot_s, point.ctx))
    if not valid:
        shown = "; ".join(f"input {c.input_len} x {c.concurrency}: {c.reason}" for c in cohorts[:3])
        raise ProfileAbortError(
            f"engine {iid}: no decode cohort of the probe was valid, so its decode speed cannot "
            f"be compared with the profile ({shown})",
            engine=iid,
            code="decode_points",
        )
    points = []
    for (input_len, concurrency), timed in valid.items():
        ctx = statistics.fmean(c for _, c in timed)
        reference = decode_reference(profile, samples, input_len, concurrency, ctx)
        assert reference is not None  # check_references refused the profile otherwise
        points.append(_point("decode", input_len, concurrency, [t for t, _ in timed], reference))
    return points


def _point(
    phase: Literal["prefill", "decode"],
    input_len: int,
    concurrency: int,
    measured: Sequence[float],
    reference: Reference,
) -> ProbePoint:
    return ProbePoint(
        phase=phase,
        input_len=input_len,
        concurrency=concurrency,
        measured_s=list(measured),
        reference_s=reference.seconds,
        reference=reference.kind,
        factors=[m / reference.seconds for m in measured],
    )


def engine_drift(
    iid: str,
    profile: Profile,
    samples: ProfileSamples,
    *,
    created_at: str,
    prefill: Sequence[PrefillTimings],
    cohorts: Sequence[Cohort],
    threshold: float,
    seconds: float,
) -> EngineDrift:
    """One engine's probe as its document holds it: every point with its factors, each phase's
    drift. A phase left without a valid repeat aborts the engine's probe."""
    points = _prefill_points(profile, samples, prefill) + _decode_points(
        iid, profile, samples, cohorts
    )
    phases = {}
    for phase in ("prefill", "decode"):
        factors = [f for p in points if p.phase == phase for f in p.factors]
        phases[phase] = drift_factor(factors, threshold) if factors else None
    return EngineDrift(
        profile_created_at=created_at,
        points=points,
        prefill=phases["prefill"],
        decode=phases["decode"],
        seconds=seconds,
    )


def left_out_line(iid: str, cohorts: Sequence[Cohort]) -> str | None:
    """The warning naming the probe's cohorts left out (invalid by the sweep's rules), or None."""
    left_out = [c for c in cohorts if c.point is None]
    if not left_out:
        return None
    return f"{iid}: {len(left_out)} probe cohort(s) left out: " + "; ".join(
        f"input {c.input_len} x {c.concurrency}: {c.reason}" for c in left_out
    )
