"""``compare A B``: the two sides read and checked, runs paired by offered load, a verdict per
measure, the edges' brackets and (with ``--profiles``) each engine's fits, in one document."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from narwhal_trial._errors import NotComparableError
from narwhal_trial._provenance import dist_version
from narwhal_trial.compare._intervals import (
    check_confidence,
    proportion_difference,
    quantile_shift,
    verdict_of,
)
from narwhal_trial.compare._sides import (
    CompareSide,
    check_comparable,
    differences,
    read_compare_side,
)
from narwhal_trial.documents._comparison import (
    Comparison,
    EdgeVerdict,
    FitChange,
    ProportionVerdict,
    RatePair,
    ShiftVerdict,
    Verdict,
)
from narwhal_trial.documents._runfolder import TrialRun
from narwhal_trial.edge._document import EdgeSearch

DEFAULT_CONFIDENCE = 0.95
QUANTILES: tuple[tuple[int, float], ...] = ((50, 0.5), (99, 0.99))

ProfileComparer = Callable[[float, np.random.Generator], list[FitChange]]
"""Compares two profile stores at a confidence (``--profiles A B``)."""


@dataclass(frozen=True, slots=True)
class CompareRequest:
    """What ``compare`` is asked: the two sides, the confidence, the bootstrap seed."""

    a: Path
    b: Path
    confidence: float = DEFAULT_CONFIDENCE
    seed: int = 0
    allow_different_workloads: bool = False
    profiles: ProfileComparer | None = None


def compare_sides(
    request: CompareRequest, sides: tuple[CompareSide, CompareSide] | None = None
) -> Comparison:
    """Read both sides (unless ``sides`` holds them, as :func:`read_compare_side` reads them),
    refuse what is not comparable, and judge every measure (B against A). TrialUsageError names
    a confidence out of range before either side is read."""
    check_confidence(request.confidence)
    a, b = sides or (read_compare_side(request.a, "A"), read_compare_side(request.b, "B"))
    differ = check_comparable(a, b, allow_different_workloads=request.allow_different_workloads)
    rng = np.random.default_rng(request.seed)
    pairs = [_pair(ra, rb, request.confidence, rng) for ra, rb in _paired(a, b)]
    edge = _edge(a.edge.search, b.edge.search) if a.edge and b.edge else None
    if not pairs and edge is None:
        raise NotComparableError(
            f"A and B share no offered load: A ran at {_loads(a)}, B at {_loads(b)}"
        )
    profiles = None if request.profiles is None else request.profiles(request.confidence, rng)
    worse = _worse(pairs, edge, profiles or [])
    return Comparison(
        generator=f"narwhal-trial {dist_version('narwhal-trial')}",
        created=datetime.now(UTC).isoformat(timespec="seconds"),
        confidence=request.confidence,
        seed=request.seed,
        a=a.facts(),
        b=b.facts(),
        workloads_differ=differ,
        differences=differences(a, b),
        pairs=pairs,
        edge=edge,
        profiles=profiles,
        worse=worse,
        exit_code=2 if worse else 0,
    )


def _load(run: TrialRun) -> tuple[float, float | None]:
    speedup = run.manifest.arguments.get("speedup")
    return run.manifest.rate, float(speedup) if isinstance(speedup, int | float) else None


def _loads(side: CompareSide) -> str:
    return ", ".join(sorted({f"{_load(r)[0]:g} request/s" for r in side.runs}))


def _paired(a: CompareSide, b: CompareSide) -> list[tuple[TrialRun, TrialRun]]:
    """Two single runs pair whatever their loads; otherwise each load both sides ran, with the
    last run at that load (an edge's repeat replaces the trial it repeated)."""
    if a.kind == "run" and b.kind == "run":
        return [(a.runs[0], b.runs[0])]
    by_a = {_load(r): r for r in a.runs}
    by_b = {_load(r): r for r in b.runs}
    return [(by_a[k], by_b[k]) for k in sorted(by_a.keys() & by_b.keys(), key=lambda k: k[0])]


def _pair(a: TrialRun, b: TrialRun, confidence: float, rng: np.random.Generator) -> RatePair:
    sa, sb = a.summary, b.summary
    attained = proportion_difference(sa.good, sa.requests, sb.good, sb.requests, confidence)
    latency: list[ShiftVerdict] = []
    for measure in ("ttft", "tpot"):
        xa = [v for v in (getattr(r, f"{measure}_s") for r in a.records) if v is not None]
        xb = [v for v in (getattr(r, f"{measure}_s") for r in b.records) if v is not None]
        if len(xa) < 2 or len(xb) < 2:
            continue
        for label, q in QUANTILES:
            shift = quantile_shift(xa, xb, q, confidence, rng)
            latency.append(
                ShiftVerdict(
                    measure=measure,
                    quantile=label,  # type: ignore[arg-type]  # QUANTILES' two literals
                    count_a=len(xa),
                    count_b=len(xb),
                    a_s=float(np.quantile(xa, q)),
                    b_s=float(np.quantile(xb, q)),
                    difference_s=shift.difference,
                    low_s=shift.low,
                    high_s=shift.high,
                    detectable_s=shift.detectable,
                    verdict=verdict_of(
                        shift.low, shift.high, no_change=0.0, higher_is_better=False
                    ),
                )
            )
    (rate_a, speedup_a), (rate_b, speedup_b) = _load(a), _load(b)
    return RatePair(
        rate_a=rate_a,
        rate_b=rate_b,
        speedup_a=speedup_a,
        speedup_b=speedup_b,
        run_a=str(a.path),
        run_b=str(b.path),
        attainment=ProportionVerdict(
            good_a=sa.good,
            requests_a=sa.requests,
            good_b=sb.good,
            requests_b=sb.requests,
            difference=attained.difference,
            low=attained.low,
            high=attained.high,
            detectable=attained.detectable,
            verdict=verdict_of(attained.low, attained.high, no_change=0.0, higher_is_better=True),
        ),
        latency=latency,
    )


def _edge(a: EdgeSearch, b: EdgeSearch) -> EdgeVerdict:
    pa, ma = a.bracket.highest_pass, a.bracket.lowest_miss
    pb, mb = b.bracket.highest_pass, b.bracket.lowest_miss
    verdict: Verdict = "no detectable difference"
    if pb is not None and ma is not None and pb >= ma:
        verdict, reason = "better", f"B passed {pb:g} request/s, where A missed from {ma:g}"
    elif pa is not None and mb is not None and pa >= mb:
        verdict, reason = "worse", f"A passed {pa:g} request/s, where B missed from {mb:g}"
    elif None in (pa, ma, pb, mb):
        reason = "a bracket lacks an end: the edges cannot be told apart"
    else:
        reason = f"the brackets overlap: A {pa:g}-{ma:g}, B {pb:g}-{mb:g} request/s"
    return EdgeVerdict(
        a_highest_pass=pa,
        a_lowest_miss=ma,
        b_highest_pass=pb,
        b_lowest_miss=mb,
        verdict=verdict,
        reason=reason,
    )


def _worse(pairs: list[RatePair], edge: EdgeVerdict | None, profiles: list[FitChange]) -> list[str]:
    found = []
    for p in pairs:
        at = f"at {p.rate_b:g} request/s"
        if p.attainment.verdict == "worse":
            found.append(f"attainment {at}")
        found.extend(
            f"{s.measure.upper()} p{s.quantile} {at}" for s in p.latency if s.verdict == "worse"
        )
    if edge is not None and edge.verdict == "worse":
        found.append("the measured edge")
    found.extend(f"{f.engine} {f.phase} at {f.at}" for f in profiles if f.verdict == "worse")
    return found
