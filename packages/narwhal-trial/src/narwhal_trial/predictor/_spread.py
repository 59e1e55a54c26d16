"""The latency spread of ``predict``'s Monte Carlo, taken from the profile's own raw timings.

The sidecar keeps every prefill repeat's TTFT and every decode stream's token times. Per engine
they become (docs/design.md §11):

- **prefill levels**, per profiled length: each repeat's TTFT over the fit's ``ttft(L)``;
- **decode levels**, per profiled point (concurrency, input length): each valid cohort's TPOT over
  the fit's ``tpot(n, ctx)`` (the fit's bias at that point, and how much it moves between repeats);
- **TTFT noise**, for the whole engine: how far each prefill repeat lies from its length's median,
  and each single-stream cohort's TTFT from the median of its input length's (seconds: the
  streams of a larger cohort prefill together, so their TTFTs are not an idle engine's);
- **TPOT noise**, for the whole engine: the mean inter-token interval of every run of ``w``
  consecutive intervals inside each cohort's overlap window (``w`` = the trial's output tokens - 1,
  the intervals one trial request's TPOT averages), less the cohort's median of them (seconds);
- **speed**, for the whole engine: each prefill repeat and each cohort's level over its point's
  median (how fast the whole engine was at that moment of the sweep).

Levels are medians and stay with their point (a fit's bias is local); noise is what lies around
the medians, pooled over the engine (a stall of the host or the server adds the same seconds
whatever the point, and pooling samples its tail); one speed is drawn per replication (a shared
host makes the whole engine faster or slower for minutes at a time).

One replication (:meth:`FleetSpread.replica`) resamples each point's repeats and cohorts and each
noise pool with replacement (a bootstrap: the fits' uncertainty, so replications differ in level
as well as in draws) and sorts the pools, so that one uniform number per request picks a
quantile: the same seed gives the same numbers at every rate (common random numbers), and a
request keeps its draw across rates.

A freshness probe may have measured the engine today against its profile
(``EngineSpread.probe_prefill``, ``probe_decode``: one factor per repeat): that side's speed is
then the median of a bootstrap resample of the probe's factors, raised to ``probe_weight``, times
a log-normal drift the probe did not see (``unseen_sd``), instead of a moment of the sweep.

The sources of spread (``Source``) can vary one at a time (``vary``): ``engine_speed`` (the speed
draw), ``fits_bootstrap`` (the levels' and noise pools' resampling) and ``request_noise`` (the
per-request uniforms). A source that does not vary sits at its centre: speed 1 (the probe's median
factor where it has one), the levels at the medians of every repeat, the pools whole, and the
per-request uniforms one fixed sequence of the seed, the same in every replication.
"""

from __future__ import annotations

import bisect
import math
import random
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Final, Literal, TypeVar

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

#: A source of spread a replication draws (``trial_sampling``, the binomial width, is not drawn).
Source = Literal["engine_speed", "fits_bootstrap", "request_noise"]
#: Every source, in the order the prediction reports them.
SOURCES: Final[tuple[Source, ...]] = ("engine_speed", "fits_bootstrap", "request_noise")
#: What a replication varies unless told otherwise: everything.
EVERY: Final[frozenset[Source]] = frozenset(SOURCES)


@dataclass(frozen=True, slots=True)
class PrefillPoint:
    """One profiled prompt length: each repeat's TTFT over the fit's."""

    length: int
    factors: tuple[float, ...]


@dataclass(frozen=True, slots=True)
class DecodePool:
    """One profiled decode point (concurrency, mean context): each valid cohort's TPOT over the
    fit's."""

    concurrency: int
    ctx: float
    levels: tuple[float, ...]


@dataclass(frozen=True, slots=True)
class EngineSpread:
    """An engine's levels and noise pools (empty when its sidecar entry holds no usable timing)
    and what they hold, in words; ``speed``: its sweep's speed history; ``probe_prefill`` and
    ``probe_decode``: per probe repeat, how fast the engine ran today over its profile (empty: no
    probe; that side's speed then comes from ``speed``)."""

    prefill: tuple[PrefillPoint, ...]
    decode: tuple[DecodePool, ...]
    ttft_noise_s: tuple[float, ...]
    tpot_noise_s: tuple[float, ...]
    source: str
    speed: tuple[float, ...] = ()
    probe_prefill: tuple[float, ...] = ()
    probe_decode: tuple[float, ...] = ()
    #: the power the probe's factors are raised to (1: taken whole)
    probe_weight: float = 1.0
    #: (prefill, decode): the relative spread of the speed the probe did not see
    unseen_sd: tuple[float, float] = (0.0, 0.0)


def _centred(groups: Iterable[list[float]]) -> list[float]:
    """Every value less its group's median (the levels are medians: noise adds the tails)."""
    out: list[float] = []
    for values in groups:
        middle = statistics.median(values)
        out += [v - middle for v in values]
    return out


def _cohort_noise(sample: DecodeSample, w: int) -> list[float]:
    """The cohort's ``w``-interval window means less their median, in seconds."""
    streams = [StreamTimes(expand_chunks(s.chunk_ns, s.chunk_tokens)) for s in sample.streams]
    streams = [s for s in streams if len(s.token_ns) >= 2]
    if not streams:
        return []
    window = decode_window(streams) if len(streams) > 1 else None
    values: list[float] = []
    for s in streams:
        values += _stream_windows(list(s.token_ns), window, w)
    return _centred([[v / 1e9 for v in values]]) if values else []


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


def _relative(groups: Iterable[list[float]]) -> list[float]:
    """Every value over its group's median: how fast the engine was at that moment of the sweep
    against its own usual speed at that point."""
    out: list[float] = []
    for values in groups:
        middle = statistics.median(values)
        if middle > 0 and len(values) > 1:
            out += [v / middle for v in values]
    return out


def _first_ttft(sample: DecodeSample) -> float | None:
    """The TTFT of the cohort's first stream to answer."""
    firsts = [(s.chunk_ns[0] - s.send_ns) / 1e9 for s in sample.streams if s.chunk_ns]
    return min(firsts) if firsts else None


def engine_spread(profile: Profile, samples: ProfileSamples, output_tokens: int) -> EngineSpread:
    """The levels and noise of one engine's accepted profile for ``output_tokens`` tokens."""
    pre = profile.prefill_fit.coefficients
    prefill = []
    ttft_groups: dict[object, list[float]] = {}
    for p in samples.prefill_samples:
        fit = ttft_quadratic_s(pre, p.length)
        factors = tuple(t / fit for t in p.ttft_s if t > 0) if fit > 0 else ()
        if factors:
            prefill.append(PrefillPoint(p.length, factors))
            ttft_groups[("prefill", p.length)] = list(p.ttft_s)
    decode: list[DecodePool] = []
    tpot_noise: list[float] = []
    fit_doc = profile.decode_fit
    if fit_doc is not None:
        w = max(1, output_tokens - 1)
        points: dict[tuple[int, int], list[tuple[float, float]]] = {}
        for c in samples.decode_samples:
            if not c.valid or c.tpot_s is None or c.ctx is None:
                continue
            first = _first_ttft(c) if c.concurrency == 1 else None
            if first is not None:  # alone on an idle engine: a clean prefill
                ttft_groups.setdefault(("decode", c.input_len), []).append(first)
            fit = tpot_batch_context_s(fit_doc.coefficients, c.concurrency, c.ctx)
            if fit > 0:
                points.setdefault((c.concurrency, c.input_len), []).append((c.ctx, c.tpot_s / fit))
                tpot_noise += _cohort_noise(c, w)
        for (n, _), found in sorted(points.items()):
            ctx = math.fsum(x for x, _ in found) / len(found)
            decode.append(DecodePool(n, ctx, tuple(level for _, level in found)))
    ttft_noise = _centred(ttft_groups.values())
    speed = _relative([list(p.factors) for p in prefill] + [list(p.levels) for p in decode])
    repeats = sum(len(p.factors) for p in prefill)
    cohorts = sum(len(p.levels) for p in decode)
    source = (
        f"{repeats} prefill repeats at {len(prefill)} lengths; {cohorts} decode cohorts at "
        f"{len(decode)} points; {len(ttft_noise)} TTFT and {len(tpot_noise)} TPOT noise samples "
        f"(windows of {max(1, output_tokens - 1)} intervals)"
    )
    return EngineSpread(
        tuple(sorted(prefill, key=lambda p: p.length)),
        tuple(decode),
        tuple(ttft_noise),
        tuple(tpot_noise),
        source,
        tuple(speed),
    )


def _resample(rng: random.Random, items: Sequence[_T]) -> list[_T]:
    return [items[rng.randrange(len(items))] for _ in items]


def _pick(pool: Sequence[float], u: float) -> float:
    return pool[min(len(pool) - 1, int(u * len(pool)))]


def _median_of_resample(rng: random.Random, values: Sequence[float]) -> float:
    return float(statistics.median(_resample(rng, values)))


def _median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def _probed(rng: random.Random, factors: Sequence[float], weight: float, sd: float) -> float:
    """One replication's speed from a probe's factors: a bootstrap median raised to ``weight``,
    times a log-normal drift of relative spread ``sd`` (drawn only when there is one)."""
    drift = math.exp(rng.gauss(0.0, sd)) if sd > 0 else 1.0
    return float(_median_of_resample(rng, factors) ** weight) * drift


class EngineReplica:
    """One replication's resampled levels and sorted noise pools of one engine, and the look-ups
    the virtual fleet makes: the nearest profiled point, in log length, log concurrency and log
    context. ``vary``: the sources drawn (the others at their centre, drawing nothing).

    ``prefill_speed`` and ``decode_speed`` multiply the levels; ``speed`` is the moment of the
    sweep drawn for a side without probe factors (1 when none is drawn)."""

    def __init__(
        self, spread: EngineSpread, rng: random.Random, vary: frozenset[Source] = EVERY
    ) -> None:
        # draws in this order: point levels, noise pools, then the engine's speed at one moment
        # of its sweep (the whole engine as fast or as slow as it was then), then the probe's
        if "fits_bootstrap" in vary:
            prefill = [_median_of_resample(rng, p.factors) for p in spread.prefill]
            decode = [_median_of_resample(rng, p.levels) for p in spread.decode]
            self._ttft_noise = sorted(_resample(rng, spread.ttft_noise_s))
            self._tpot_noise = sorted(_resample(rng, spread.tpot_noise_s))
        else:
            prefill = [_median(p.factors) for p in spread.prefill]
            decode = [_median(p.levels) for p in spread.decode]
            self._ttft_noise = sorted(spread.ttft_noise_s)
            self._tpot_noise = sorted(spread.tpot_noise_s)
        pre, dec = spread.probe_prefill, spread.probe_decode
        w, (pre_sd, dec_sd) = spread.probe_weight, spread.unseen_sd
        if "engine_speed" in vary:
            history = spread.speed if not (pre and dec) else ()
            self.speed = history[rng.randrange(len(history))] if history else 1.0
            self.prefill_speed = _probed(rng, pre, w, pre_sd) if pre else self.speed
            self.decode_speed = _probed(rng, dec, w, dec_sd) if dec else self.speed
        else:
            self.speed = 1.0
            self.prefill_speed = _median(pre) ** w if pre else 1.0
            self.decode_speed = _median(dec) ** w if dec else 1.0
        self._lengths = [math.log(p.length) for p in spread.prefill]
        self._prefill = [level * self.prefill_speed for level in prefill]
        self._decode = [
            (p.concurrency, math.log(p.ctx), level * self.decode_speed)
            for p, level in zip(spread.decode, decode, strict=True)
        ]
        self._levels: dict[tuple[int, int], float] = {}

    def prefill_level(self, length: int) -> float:
        """The prefill's factor on the fit: the nearest profiled length's resampled median (the
        engine's prefill speed alone without profiled lengths)."""
        if not self._prefill:
            return self.prefill_speed
        x = math.log(length)
        k = min(range(len(self._lengths)), key=lambda j: abs(self._lengths[j] - x))
        return self._prefill[k]

    def ttft_noise(self, u: float) -> float:
        """Seconds added to a request's TTFT: quantile ``u`` of the noise pool (0 without one)."""
        return _pick(self._ttft_noise, u) if self._ttft_noise else 0.0

    def tpot_noise(self, u: float) -> float:
        """Seconds added to a request's TPOT: quantile ``u`` of the noise pool (0 without one)."""
        return _pick(self._tpot_noise, u) if self._tpot_noise else 0.0

    def decode_level(self, n: int, ctx: float) -> float:
        """The step cost's factor for ``n`` sequences at mean context ``ctx``: the nearest point's
        resampled median cohort level (the engine's decode speed alone without profiled points)."""
        key = (n, int(math.log2(max(ctx, 1.0)) * 4))  # a quarter-octave of context per entry
        level = self._levels.get(key)
        if level is None:
            level = self.decode_speed
            if self._decode:
                ln, lc = math.log(max(n, 1)), math.log(max(ctx, 1.0))
                near = min(self._decode, key=lambda p: (abs(math.log(p[0]) - ln), abs(p[1] - lc)))
                level = near[2]
            self._levels[key] = level
        return level


def _holds(spread: EngineSpread, source: Source) -> bool:
    """Whether ``spread`` holds something ``source`` draws."""
    if source == "engine_speed":
        return bool(spread.speed or spread.probe_prefill or spread.probe_decode)
    noise = bool(spread.ttft_noise_s or spread.tpot_noise_s)
    if source == "request_noise":
        return noise
    return noise or bool(spread.prefill or spread.decode)


@dataclass(frozen=True, slots=True)
class FleetSpread:
    """Every engine's pools; ``replica(seed, r)`` draws replication ``r``."""

    engines: dict[str, EngineSpread]

    def replica(self, seed: int, index: int, vary: frozenset[Source] = EVERY) -> Replica:
        """Replication ``index`` of ``seed``: reproducible, independent of the rate. ``vary``:
        the sources drawn; without ``request_noise`` every replication's requests take one fixed
        sequence of uniforms (the seed's own, apart from every replication's)."""
        rng = random.Random(f"narwhal-predict:{seed}:{index}")
        engines = {iid: EngineReplica(s, rng, vary) for iid, s in sorted(self.engines.items())}
        if "request_noise" in vary:
            return Replica(engines, rng.random)
        return Replica(engines, random.Random(f"narwhal-predict:{seed}:fixed-requests").random)

    def varies(self, source: Source) -> bool:
        """Whether any engine holds something ``source`` draws (no: every replication with only
        that source varying is the same)."""
        return any(_holds(s, source) for s in self.engines.values())

    @property
    def speed_from(self) -> Literal["sweep", "probe"]:
        """probe: some engine's speed (either side) comes from a probe's factors; else sweep."""
        probed = any(s.probe_prefill or s.probe_decode for s in self.engines.values())
        return "probe" if probed else "sweep"


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
