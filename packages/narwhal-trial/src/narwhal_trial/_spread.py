"""The latency spread of ``predict``'s Monte Carlo, taken from the profile's own raw timings.

The sidecar keeps every prefill repeat's TTFT and every decode stream's token times. Per engine
they become pools of *factors* relative to the fit (docs/design.md §11):

- **prefill**, per profiled length: each repeat's TTFT over the fit's ``ttft(L)``;
- **decode level**, per profiled point (concurrency, context): each valid cohort's TPOT over the
  fit's ``tpot(n, ctx)`` (the fit's bias at that point, and how much it moves between repeats);
- **decode dispersion**, per cohort: the mean inter-token interval of every run of ``w``
  consecutive intervals inside the cohort's overlap window (``w`` = the trial's output tokens - 1,
  the intervals one trial request's TPOT averages), over the cohort's mean of them (mean 1).

One replication (:meth:`FleetSpread.replica`) resamples each point's repeats and cohorts with
replacement (a bootstrap: the fits' uncertainty, so replications differ in level as well as in
draws) and sorts every pool, so that one uniform number per request picks a quantile: the same
seed gives the same numbers at every rate (common random numbers), and a request keeps its draw
across rates.
"""

from __future__ import annotations

import bisect
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from narwhal_fit import (
    DecodeWindow,
    StreamTimes,
    decode_window,
    expand_chunks,
    tpot_batch_context_s,
    ttft_quadratic_s,
)
from narwhal_store import DecodeSample, Profile, ProfileSamples

_T = TypeVar("_T")

#: Windows start every ``w // _STRIDE_PARTS`` tokens (overlapping: a stall counts in several).
_STRIDE_PARTS = 4


@dataclass(frozen=True, slots=True)
class PrefillPoint:
    """One profiled prompt length: each repeat's TTFT over the fit's."""

    length: int
    factors: tuple[float, ...]


@dataclass(frozen=True, slots=True)
class DecodeCohort:
    """One valid cohort: its TPOT over the fit's, and its ``w``-interval windows over their mean."""

    level: float
    windows: tuple[float, ...]


@dataclass(frozen=True, slots=True)
class DecodePool:
    """One profiled decode point (concurrency, mean context) and its cohorts."""

    concurrency: int
    ctx: float
    cohorts: tuple[DecodeCohort, ...]


@dataclass(frozen=True, slots=True)
class EngineSpread:
    """An engine's pools (empty when its sidecar entry holds no usable timing) and what they hold,
    in words."""

    prefill: tuple[PrefillPoint, ...]
    decode: tuple[DecodePool, ...]
    source: str

    @property
    def empty(self) -> bool:
        """No pool at all: the engine's requests keep the fits' figures."""
        return not self.prefill and not self.decode


def _cohort_windows(sample: DecodeSample, w: int) -> tuple[float, ...]:
    streams = [StreamTimes(expand_chunks(s.chunk_ns, s.chunk_tokens)) for s in sample.streams]
    streams = [s for s in streams if len(s.token_ns) >= 2]
    if not streams:
        return ()
    window = decode_window(streams) if len(streams) > 1 else None
    values: list[float] = []
    for s in streams:
        values += _stream_windows(list(s.token_ns), window, w)
    mean = math.fsum(values) / len(values) if values else 0.0
    return tuple(v / mean for v in values) if mean > 0 else ()


def _stream_windows(times: list[int], window: DecodeWindow | None, w: int) -> list[float]:
    """Mean intervals (ns) of every ``w``-interval run inside ``window`` (the whole stream when
    alone); the in-window span as one value when fewer than ``w`` intervals fit."""
    if window is not None:
        lo = bisect.bisect_left(times, window.start_ns)
        hi = bisect.bisect_right(times, window.end_ns)
        times = times[lo:hi]
    if len(times) < 2:
        return []
    if len(times) - 1 <= w:
        return [(times[-1] - times[0]) / (len(times) - 1)]
    stride = max(1, w // _STRIDE_PARTS)
    return [(times[i + w] - times[i]) / w for i in range(0, len(times) - w, stride)]


def engine_spread(profile: Profile, samples: ProfileSamples, output_tokens: int) -> EngineSpread:
    """The pools of one engine's accepted profile for requests of ``output_tokens`` tokens."""
    pre = profile.prefill_fit.coefficients
    prefill = []
    for p in samples.prefill_samples:
        fit = ttft_quadratic_s(pre, p.length)
        factors = tuple(t / fit for t in p.ttft_s if t > 0) if fit > 0 else ()
        if factors:
            prefill.append(PrefillPoint(p.length, factors))
    decode: list[DecodePool] = []
    fit_doc = profile.decode_fit
    if fit_doc is not None:
        w = max(1, output_tokens - 1)
        points: dict[tuple[int, int], list[tuple[float, DecodeCohort]]] = {}
        for c in samples.decode_samples:
            if not c.valid or c.tpot_s is None or c.ctx is None:
                continue
            fit = tpot_batch_context_s(fit_doc.coefficients, c.concurrency, c.ctx)
            windows = _cohort_windows(c, w)
            if fit > 0 and windows:
                cohort = DecodeCohort(c.tpot_s / fit, windows)
                points.setdefault((c.concurrency, c.input_len), []).append((c.ctx, cohort))
        for (n, _), found in sorted(points.items()):
            ctx = math.fsum(x for x, _ in found) / len(found)
            decode.append(DecodePool(n, ctx, tuple(c for _, c in found)))
    repeats = sum(len(p.factors) for p in prefill)
    cohorts = sum(len(p.cohorts) for p in decode)
    n_windows = sum(len(c.windows) for p in decode for c in p.cohorts)
    source = (
        f"{repeats} prefill repeats at {len(prefill)} lengths; {cohorts} decode cohorts at "
        f"{len(decode)} points, {n_windows} windows of {max(1, output_tokens - 1)} intervals"
    )
    return EngineSpread(tuple(sorted(prefill, key=lambda p: p.length)), tuple(decode), source)


def _resample(rng: random.Random, items: Sequence[_T]) -> list[_T]:
    return [items[rng.randrange(len(items))] for _ in items]


def _pick(pool: Sequence[float], u: float) -> float:
    return pool[min(len(pool) - 1, int(u * len(pool)))]


@dataclass(frozen=True, slots=True)
class _ReplicaDecode:
    concurrency: int
    log_ctx: float
    level: float
    windows: tuple[float, ...]


class EngineReplica:
    """One replication's resampled, sorted pools of one engine, and the look-ups the virtual
    fleet makes: the nearest profiled point, in log length, log concurrency and log context."""

    def __init__(self, spread: EngineSpread, rng: random.Random) -> None:
        self._lengths = [math.log(p.length) for p in spread.prefill]
        self._prefill = [sorted(_resample(rng, p.factors)) for p in spread.prefill]
        self._decode: list[_ReplicaDecode] = []
        for pool in spread.decode:
            chosen = _resample(rng, pool.cohorts)
            level = math.fsum(c.level for c in chosen) / len(chosen)
            windows = tuple(sorted(v for c in chosen for v in c.windows))
            point = _ReplicaDecode(pool.concurrency, math.log(pool.ctx), level, windows)
            self._decode.append(point)
        self._levels: dict[tuple[int, int], float] = {}

    def prefill_factor(self, length: int, u: float) -> float:
        """A request's TTFT factor: quantile ``u`` of the nearest profiled length's repeats (both
        neighbours' when the length lies between two)."""
        if not self._prefill:
            return 1.0
        x = math.log(length)
        k = bisect.bisect_left(self._lengths, x)
        if k < len(self._lengths) and self._lengths[k] == x:
            return _pick(self._prefill[k], u)
        near = [j for j in (k - 1, k) if 0 <= j < len(self._prefill)]
        return _pick(sorted(v for j in near for v in self._prefill[j]), u)

    def _nearest(self, n: float, ctx: float) -> _ReplicaDecode | None:
        if not self._decode:
            return None
        ln, lc = math.log(max(n, 1.0)), math.log(max(ctx, 1.0))
        return min(
            self._decode, key=lambda p: (abs(math.log(p.concurrency) - ln), abs(p.log_ctx - lc))
        )

    def decode_level(self, n: int, ctx: float) -> float:
        """The step cost's factor for ``n`` sequences at mean context ``ctx``: the nearest point's
        resampled mean cohort level."""
        key = (n, int(math.log2(max(ctx, 1.0)) * 4))  # a quarter-octave of context per entry
        level = self._levels.get(key)
        if level is None:
            near = self._nearest(n, ctx)
            level = self._levels[key] = 1.0 if near is None else near.level
        return level

    def tpot_factor(self, mean_batch: float, ctx: float, u: float) -> float:
        """A request's TPOT dispersion: quantile ``u`` of the nearest point's windows."""
        near = self._nearest(mean_batch, ctx)
        return 1.0 if near is None else _pick(near.windows, u)


@dataclass(frozen=True, slots=True)
class FleetSpread:
    """Every engine's pools; ``replica(seed, r)`` draws replication ``r``."""

    engines: dict[str, EngineSpread]

    def replica(self, seed: int, index: int) -> Replica:
        """Replication ``index`` of ``seed``: reproducible, independent of the rate."""
        rng = random.Random(f"narwhal-predict:{seed}:{index}")
        engines = {iid: EngineReplica(s, rng) for iid, s in sorted(self.engines.items())}
        return Replica(engines, rng.random)


class Replica:
    """One replication: the engines' resampled pools and the per-request uniform numbers (two per
    request, drawn in request order, so request ``k`` gets the same pair at every rate)."""

    def __init__(self, engines: dict[str, EngineReplica], uniform: Callable[[], float]) -> None:
        self.engines = engines
        self._uniform = uniform
        self._draws: list[tuple[float, float]] = []

    def draws(self, request: int) -> tuple[float, float]:
        """Request ``request``'s (prefill, decode) uniforms."""
        while len(self._draws) <= request:
            self._draws.append((self._uniform(), self._uniform()))
        return self._draws[request]
