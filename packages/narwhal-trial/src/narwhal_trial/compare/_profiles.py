"""``compare --profiles A B``: two profile stores' fits, engine by engine, at the points both
sweeps measured: each fit's latency in A and in B, their ratio B/A with an interval, and a
verdict (a ratio above 1 is slower, worse).

Engines pair by iid: a profile of the same key in both stores, or the one profile each store holds
of the engine when their keys differ (the role split changed). Points: prefill, every prompt
length both sidecars hold TTFTs of; decode, every (concurrency, prompt length) both hold valid
cohorts of, the fits taken at the two sides' mean context there. Where the sweeps share no point,
the common domain stands in: prefill at its smallest, middle (geometric) and largest length,
decode at each shared concurrency level in the middle of the common context range.

Intervals, where both sides hold raw samples at the point: the ratio of the two sides' medians is
bootstrapped (each side resampled apart, with the seeded generator), and its percentile interval,
relative to the observed ratio of the medians, is laid on the fits' ratio. Prefill's samples are
the point's TTFT repeats (two or more a side); decode's are the means of each run of
``BLOCK_INTERVALS`` consecutive inter-token intervals inside a cohort's decode window, averaged over
its streams (they decode in the same steps), so that one cohort a point (the profiler's default)
still has a spread. Elsewhere (no raw samples at the point on a side) each fit's own error
stands in: its residual spread (mean relative error) combined with the typical standard error of
one of its points' medians, from the raw samples' spread at the points it was fitted on, as the
relative standard error of its latency (:func:`spread_ratio`). A point with neither is left out.
Either interval holds the sweeps' own noise, not a drift of the host between the two sweeps.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

import numpy as np

from narwhal_fit import expand_chunks
from narwhal_store import (
    DECODE_FORM,
    PREFILL_FORM,
    DecodeFitDoc,
    DecodeSample,
    FitDoc,
    FitQuality,
    LoadedStore,
    Profile,
    ProfileSamples,
    StoreError,
    read_store,
)
from narwhal_trial._errors import NotComparableError, ReadError
from narwhal_trial.compare._compare import ProfileComparer
from narwhal_trial.compare._intervals import median_ratio, spread_ratio, verdict_of
from narwhal_trial.documents._comparison import FitChange

BLOCK_INTERVALS = 8
"""Inter-token intervals per decode block: the raw sample of a decode point."""
_MAD_TO_SD = math.sqrt(math.pi / 2)


def profile_comparer(store_a: Path, store_b: Path) -> ProfileComparer:
    """:func:`compare_profiles` of the two stores, as ``CompareRequest.profiles`` takes it."""

    def compare(confidence: float, rng: np.random.Generator) -> list[FitChange]:
        return compare_profiles(store_a, store_b, confidence=confidence, rng=rng)

    return compare


def compare_profiles(
    store_a: Path, store_b: Path, *, confidence: float, rng: np.random.Generator
) -> list[FitChange]:
    """Every engine both stores profiled, B's fits against A's: prefill points, then decode
    points, engine by engine. ``ReadError`` names a store that is missing or not a profile store
    with its sidecar; ``NotComparableError`` stores without an engine in common, or a fit form
    this comparison does not know."""
    a, b = _read(store_a, "A"), _read(store_b, "B")
    pairs = _pairs(a, b)
    if not pairs:
        raise NotComparableError(
            f"the profile stores share no engine: A {store_a} holds {_iids(a)}, "
            f"B {store_b} holds {_iids(b)}"
        )
    changes: list[FitChange] = []
    for engine, pa, pb in pairs:
        for side, profile in (("A", pa), ("B", pb)):
            _known(engine, side, a.path if side == "A" else b.path, profile)
        sa, sb = a.samples(pa.key), b.samples(pb.key)
        changes += _prefill(engine, pa, pb, sa, sb, confidence, rng)
        if pa.decode_fit is not None and pb.decode_fit is not None:
            changes += _decode(engine, pa.decode_fit, pb.decode_fit, sa, sb, confidence, rng)
    return changes


def _read(path: Path, label: str) -> LoadedStore:
    try:
        missing = not path.exists() and not path.is_symlink()
    except OSError:  # a folder on its way cannot be entered: read_store says so
        missing = False
    if missing:
        raise ReadError(f"--profiles {label} {path} does not exist")
    try:
        return read_store(path)
    except StoreError as exc:
        raise ReadError(f"--profiles {label}: not a profile store with its sidecar: {exc}") from exc


def _iids(store: LoadedStore) -> str:
    return ", ".join(sorted({p.key.engine for p in store.store.profiles})) or "no profile"


def _pairs(a: LoadedStore, b: LoadedStore) -> list[tuple[str, Profile, Profile]]:
    """(label, A's profile, B's profile) for each engine in both: its profiles of the same key,
    or its one profile in each store when their keys differ; labelled by the engine's iid, or by
    the key when the engine pairs more than once (a profile a role split)."""
    pairs: list[tuple[str, Profile, Profile]] = []
    for iid in sorted({p.key.engine for p in a.store.profiles}):
        in_a, in_b = a.store.find(iid), b.store.find(iid)
        same = [(pa, pb) for pa in in_a for pb in in_b if pa.key.ident() == pb.key.ident()]
        if not same and len(in_a) == len(in_b) == 1:
            same = [(in_a[0], in_b[0])]
        pairs += [(iid if len(same) == 1 else pa.key.label(), pa, pb) for pa, pb in same]
    return pairs


def _known(engine: str, side: str, path: Path, profile: Profile) -> None:
    forms = [(profile.prefill_fit.form, PREFILL_FORM)]
    if profile.decode_fit is not None:
        forms.append((profile.decode_fit.form, DECODE_FORM))
    for form, known in forms:
        if form != known:
            raise NotComparableError(
                f"{side} {path}: engine {engine}'s fit has form {form}; compare knows "
                f"{PREFILL_FORM} and {DECODE_FORM}"
            )


def _fit_error(fit: FitDoc, groups: Iterable[list[float]]) -> float | None:
    """The fit's relative standard error away from its points: its residual spread (mean
    relative error) and the typical standard error of one of its points' medians (the raw
    samples' relative spread over √count), both times √(π/2), combined; None when neither is known.
    The residuals alone understate it: a three-coefficient fit through four medians follows
    their noise."""
    quality = FitQuality.of(fit)
    misfit = None if quality is None else quality.mean_rel_error * _MAD_TO_SD
    medians = [
        _MAD_TO_SD * float(np.std(np.log(g), ddof=1)) / math.sqrt(len(g))
        for g in groups
        if len(g) >= 2
    ]
    noise = float(np.median(medians)) if medians else None
    if misfit is None and noise is None:
        return None
    return math.hypot(misfit or 0.0, noise or 0.0)


def _point(
    engine: str,
    phase: Literal["prefill", "decode"],
    at: str,
    fits: tuple[float, float],
    raw: tuple[list[float], list[float]],
    errors: tuple[float | None, float | None],
    confidence: float,
    rng: np.random.Generator,
) -> FitChange | None:
    """One point: the fits' ratio and its interval (raw samples, else the fits' errors)."""
    a_s, b_s = fits
    if a_s <= 0 or b_s <= 0:
        return None
    ratio = b_s / a_s
    xa, xb = raw
    rel_a, rel_b = errors
    if len(xa) >= 2 and len(xb) >= 2:
        found = median_ratio(xa, xb, confidence, rng)
        low, high = ratio * found.low / found.ratio, ratio * found.high / found.ratio
    elif rel_a is not None and rel_b is not None:
        found = spread_ratio(ratio, rel_a, rel_b, confidence)
        low, high = found.low, found.high
    else:
        return None
    return FitChange(
        engine=engine,
        phase=phase,
        at=at,
        a_s=a_s,
        b_s=b_s,
        ratio=ratio,
        low=low,
        high=high,
        verdict=verdict_of(low, high, no_change=1.0, higher_is_better=False),
    )


def _across(lo: float, hi: float) -> list[int]:
    """The smallest, the geometric middle and the largest of ``[lo, hi]`` (none when empty)."""
    if lo <= 0 or lo > hi:
        return []
    return sorted({round(lo), round(math.sqrt(lo * hi)), round(hi)})


def _bounds(fits: tuple[FitDoc, FitDoc], low: str, high: str) -> tuple[float, float]:
    """The domain both fits cover between their ``low`` and ``high`` keys (empty: lo > hi)."""
    lows = [f.domain.get(low) for f in fits]
    highs = [f.domain.get(high) for f in fits]
    numbers = [float(v) for v in (*lows, *highs) if isinstance(v, int | float)]
    if len(numbers) != 4:
        return (1.0, 0.0)
    return (max(numbers[:2]), min(numbers[2:]))


def _ttfts(samples: ProfileSamples) -> dict[int, list[float]]:
    out: dict[int, list[float]] = defaultdict(list)
    for p in samples.prefill_samples:
        out[p.length] += [t for t in p.ttft_s if t > 0]
    return out


def _prefill(
    engine: str,
    pa: Profile,
    pb: Profile,
    sa: ProfileSamples,
    sb: ProfileSamples,
    confidence: float,
    rng: np.random.Generator,
) -> list[FitChange]:
    fa, fb = pa.prefill_fit, pb.prefill_fit
    raw_a, raw_b = _ttfts(sa), _ttfts(sb)
    shared = sorted(raw_a.keys() & raw_b.keys())
    points = [(n, raw_a[n], raw_b[n]) for n in shared] or [
        (n, [], []) for n in _across(*_bounds((fa, fb), "min_len", "max_len"))
    ]
    errors = (_fit_error(fa, raw_a.values()), _fit_error(fb, raw_b.values()))
    found = (
        _point(engine, "prefill", f"{n} tokens", (fa.ttft_s(n), fb.ttft_s(n)), (xa, xb),
               errors, confidence, rng)
        for n, xa, xb in points
    )  # fmt: skip
    return [c for c in found if c is not None]


def cohort_blocks(sample: DecodeSample) -> list[float]:
    """A decode cohort's raw samples (seconds): the mean of each run of ``BLOCK_INTERVALS``
    consecutive inter-token intervals of every stream inside the cohort's decode window (the
    last first token to the first last token; a lone stream's whole span), averaged over the
    streams block by block; none when a stream holds fewer than ``BLOCK_INTERVALS`` there."""
    expanded = (expand_chunks(s.chunk_ns, s.chunk_tokens) for s in sample.streams)
    times = [np.asarray(t, np.int64) for t in expanded if len(t) >= 2]
    if not times:
        return []
    start, end = max(int(t[0]) for t in times), min(int(t[-1]) for t in times)
    blocks = []
    for t in times:
        gaps = np.diff(t[(t >= start) & (t <= end)]) / 1e9
        count = len(gaps) // BLOCK_INTERVALS
        if count == 0:
            return []
        blocks.append(gaps[: count * BLOCK_INTERVALS].reshape(count, BLOCK_INTERVALS).mean(axis=1))
    count = min(len(b) for b in blocks)
    return [float(v) for v in np.mean([b[:count] for b in blocks], axis=0) if v > 0]


def _cohorts(samples: ProfileSamples) -> dict[tuple[int, int], tuple[list[float], list[float]]]:
    """Per (prompt length, concurrency): the valid cohorts' blocks and their mean contexts."""
    out: dict[tuple[int, int], tuple[list[float], list[float]]] = {}
    for c in samples.decode_samples:
        if c.valid and c.ctx is not None and c.tpot_s is not None:
            blocks, contexts = out.setdefault((c.input_len, c.concurrency), ([], []))
            blocks += cohort_blocks(c)
            contexts.append(c.ctx)
    return out


def _decode(
    engine: str,
    fa: DecodeFitDoc,
    fb: DecodeFitDoc,
    sa: ProfileSamples,
    sb: ProfileSamples,
    confidence: float,
    rng: np.random.Generator,
) -> list[FitChange]:
    raw_a, raw_b = _cohorts(sa), _cohorts(sb)
    points: list[tuple[str, int, float, list[float], list[float]]] = []
    for length, n in sorted(raw_a.keys() & raw_b.keys()):
        (xa, ca), (xb, cb) = raw_a[length, n], raw_b[length, n]
        at = f"concurrency {n} at {length} tokens"
        points.append((at, n, float(np.mean(ca + cb)), xa, xb))
    lo, hi = _bounds((fa, fb), "ctx_min", "ctx_max")
    if not points and 0 < lo <= hi:
        ctx = round(math.sqrt(lo * hi))
        levels = [{int(n) for n in f.domain.get("concurrency") or []} for f in (fa, fb)]
        at = "concurrency {} at a context of {} tokens"
        points = [(at.format(n, ctx), n, ctx, [], []) for n in sorted(levels[0] & levels[1])]
    errors = (
        _fit_error(fa, (x for x, _ in raw_a.values())),
        _fit_error(fb, (x for x, _ in raw_b.values())),
    )
    found = (
        _point(engine, "decode", at, (fa.tpot_s(n, ctx), fb.tpot_s(n, ctx)), (xa, xb),
               errors, confidence, rng)
        for at, n, ctx, xa, xb in points
    )  # fmt: skip
    return [c for c in found if c is not None]
