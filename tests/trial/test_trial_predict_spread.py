"""``predict``'s Monte Carlo: the spread comes from the sidecar's raw timings, reproducibly."""

from __future__ import annotations

import json
import random
from collections import deque
from decimal import Decimal
from pathlib import Path

import pytest

from narwhal_store import read_store
from narwhal_trial.predictor._beyond import beyond_domain
from narwhal_trial.predictor._model import FleetModel, TrialTarget
from narwhal_trial.predictor._predict import PredictRequest, predict
from narwhal_trial.predictor._spread import EngineReplica, engine_spread
from narwhal_trial.predictor._vtime import SimulatedOutcome, TrialShape, _enqueue, _Seq

from ._store_kit import decode_sample, prefill_sample, write_profiles
from .conftest import Cli

L = 8192
LENGTHS = [2048, 4096, 8192, 12288]
PREFILL = {"a": 0.0, "b": 0.5 / L, "c": 0.0}  # 0.5 s per 8,192-token prompt, all on the GPU
DECODE = {"d0": 0.01, "d1": 0.0, "d2": 0.0}  # 10 ms per step, whatever the batch
FACTORS = (0.8, 1.0, 1.2)  # every length's repeats, relative to the fit
#: A stream whose first 200 intervals take 6 ms and next 200 take 10 ms: windows of 127 intervals
#: range from 6 to 10 ms, their mean is 8 ms: the cohort's level is 0.8 of the fit's 10 ms.
GAPS = [0.006] * 200 + [0.010] * 200


def _spread_store(tmp_path: Path) -> tuple[Path, Path]:
    fleet = tmp_path / "fleet.json"
    fleet.write_text(
        json.dumps(
            {
                "format": "narwhal.fleet",
                "format_version": 1,
                "profiles": {"path": "profiles/fleet-profiles.json"},
                "engines": [{"iid": "e0", "role": "mixed", "url": "http://127.0.0.1:9100"}],
            }
        )
    )
    prefill = [prefill_sample(n, [f * 0.5 * n / L for f in FACTORS]) for n in LENGTHS]
    decode = [
        decode_sample(n, [GAPS] * c, 0.008, n + 200.0, repeat)
        for n in (4096, 8192)
        for c in (1, 4)
        for repeat in range(2)
    ]
    store = write_profiles(
        fleet, LENGTHS, [4096, 8192], fits={"e0": (PREFILL, DECODE)}, samples=(prefill, decode)
    )
    return fleet, store


def _request(
    fleet: Path,
    store: Path,
    *,
    rate: float | None,
    replications: int,
    seed: int = 0,
    find: bool = False,
    out: int = 128,
) -> PredictRequest:
    """The runbook's trial; ``out`` 2 (and no TPOT bound) makes the edge the prefill queue's."""
    return PredictRequest(
        fleet=fleet,
        profiles=store,
        limits=None,
        shape=TrialShape(L, out, 200),
        target=TrialTarget(Decimal("2"), Decimal("0.0333" if out > 2 else "1"), Decimal("0.95")),
        rate=rate,
        find_max_rate=find,
        replications=replications,
        seed=seed,
    )


def test_one_replication_is_the_fits_alone(tmp_path: Path) -> None:
    """``--replications 1``: every request gets the fits' figures, whatever the sidecar holds."""
    fleet, store = _spread_store(tmp_path)
    p = predict(_request(fleet, store, rate=0.5, replications=1)).prediction
    assert p is not None and p.attainment_interval.method == "fit-residuals"
    assert p.ttft_s.p50 == pytest.approx(0.51) and p.ttft_s.max == pytest.approx(0.51)
    assert p.tpot_s.p50 == pytest.approx(0.01) and p.tpot_s.p99 == pytest.approx(0.01)
    assert p.pass_probability == 1.0


def test_spread_gives_the_profiles_level_and_noise(tmp_path: Path) -> None:
    """At a light load, TTFT sits at the repeats' median and spreads by how far the repeats lie
    from it (up to +0.15 s at 12,288 tokens) and by the engine's speed at one moment of its sweep
    (each length's repeats: 0.8, 1.0 and 1.2 of their median); TPOT sits at the cohorts' level
    (8 ms, not the fit's 10 ms) and spreads as their 127-interval windows (6 to 10 ms) and that
    speed: the percentiles differ where the engine's did."""
    fleet, store = _spread_store(tmp_path)
    p = predict(_request(fleet, store, rate=0.25, replications=20)).prediction
    assert p is not None and p.replications == 20
    assert p.attainment_interval.method == "monte-carlo"
    assert p.engines[0].max_decoding == 1  # every request alone: the spread is the profile's
    assert p.ttft_s.max is not None and p.ttft_s.p50 is not None and p.ttft_s.p99 is not None
    # the slowest resampled median at the slowest speed (1.2 x 1.2 x 0.5 s), the step's 10 ms,
    # the largest noise (+0.15 s)
    assert p.ttft_s.max <= 1.2 * 1.2 * 0.5 + 0.01 + 0.15 + 1e-9
    assert 0.45 <= p.ttft_s.p50 <= 0.57
    assert p.ttft_s.p99 - p.ttft_s.p50 > 0.05
    assert p.tpot_s.p50 == pytest.approx(0.008, rel=0.1)
    # the slowest window (10 ms) less the windows' median (7.6 ms: they start every 31
    # intervals, more of them in the 6 ms half), on the 8 ms level at the slowest speed (1.2)
    assert p.tpot_s.max is not None and p.tpot_s.max <= 0.008 * 1.2 + 0.0025
    assert p.tpot_s.p99 - p.tpot_s.p50 > 0.001


def test_same_seed_same_prediction(tmp_path: Path) -> None:
    """The replications are a function of the seed alone."""
    fleet, store = _spread_store(tmp_path)
    one = predict(_request(fleet, store, rate=1.95, replications=30, seed=7, out=2))
    two = predict(_request(fleet, store, rate=1.95, replications=30, seed=7, out=2))
    other = predict(_request(fleet, store, rate=1.95, replications=30, seed=8, out=2))
    assert one.model_dump() == two.model_dump()
    assert one.prediction is not None and other.prediction is not None
    assert one.prediction.ttft_s != other.prediction.ttft_s


def test_the_edge_is_a_band_and_attainment_falls_gradually(tmp_path: Path) -> None:
    """Service times spread 0.8-1.2 x 0.5 s: near 2 request/s some replications pass and some do
    not, so the pass probability falls over a range of rates (0.9 > 0.5 > 0.1 crossings, each
    bracketed), while the fits alone put all three at one rate."""
    fleet, store = _spread_store(tmp_path)
    search = predict(_request(fleet, store, rate=None, replications=40, find=True, out=2)).search
    assert search is not None
    band = search.band
    assert band.pass_90 is not None and band.pass_50 is not None and band.pass_10 is not None
    assert band.pass_90 <= band.pass_50 <= band.pass_10
    assert band.pass_10 / band.pass_90 > 1.02
    assert search.max_rate == band.pass_50
    assert any(0 < p < 1 for _, p in band.curve)
    probabilities = [p for _, p in sorted(band.curve)]
    assert probabilities == sorted(probabilities, reverse=True)  # falls with rate
    fits = predict(_request(fleet, store, rate=None, replications=1, find=True, out=2)).search
    assert fits is not None
    assert fits.band.pass_90 == fits.band.pass_50 == fits.band.pass_10 == fits.max_rate


def test_windows_lie_inside_the_cohorts_overlap(tmp_path: Path) -> None:
    """A stream that runs alone before the others start contributes only its shared part: its
    lone 20 ms intervals are outside the cohort's window, so no window reads them (every window is
    8 ms, no noise)."""
    _, store = _spread_store(tmp_path)
    loaded = read_store(store)
    profile = loaded.store.profiles[0]
    samples = loaded.samples(profile.key).model_copy(deep=True)
    cohort = decode_sample(8192, [[0.02] * 50 + [0.008] * 200, [0.008] * 200], 0.008, 8292.0)
    late = cohort["streams"][1]
    late["chunk_ns"] = [t + 1_000_000_000 for t in late["chunk_ns"]]  # starts 1 s later
    samples.decode_samples = [type(samples.decode_samples[0]).model_validate(cohort)]
    spread = engine_spread(profile, samples, 32)
    (pool,) = spread.decode
    assert pool.levels == (pytest.approx(0.8),)
    assert spread.tpot_noise_s and max(abs(v) for v in spread.tpot_noise_s) < 1e-6
    replica = EngineReplica(spread, random.Random(1))
    assert replica.decode_level(2, 8292.0) == pytest.approx(0.8 * replica.speed)


def test_a_replication_runs_at_one_moment_of_the_sweep(tmp_path: Path) -> None:
    """The speed pool is every repeat and cohort over its point's median (the prefill repeats
    here: 0.8, 1.0 and 1.2); a replication draws one and scales every level by it."""
    _, store = _spread_store(tmp_path)
    loaded = read_store(store)
    profile = loaded.store.profiles[0]
    spread = engine_spread(profile, loaded.samples(profile.key), 128)
    assert sorted({round(v, 9) for v in spread.speed}) == [0.8, 1.0, 1.2]
    speeds = set()
    for seed in range(30):
        replica = EngineReplica(spread, random.Random(seed))
        speeds.add(round(replica.speed, 9))
        level = replica.decode_level(1, 4296.0)  # every cohort's level is 0.8
        assert level == pytest.approx(0.8 * replica.speed)
    assert speeds == {0.8, 1.0, 1.2}


def test_cli_replications(cli: Cli, tmp_path: Path) -> None:
    """The command's default is the Monte Carlo; 1 is the fits alone; 0 is refused, one line."""
    fleet, store = _spread_store(tmp_path)
    base = [
        "predict", "--fleet", str(fleet), "--profiles", str(store), "--input-tokens", str(L),
        "--output-tokens", "128", "--requests", "200", "--ttft", "2", "--tpot", "0.0333",
        "--attainment", "0.95", "--rate", "0.5",
    ]  # fmt: skip
    done = cli(*base)
    assert done.returncode == 0, done.stderr
    assert "100 replications (seed 0)" in done.stdout
    assert "pass probability 1.00" in done.stdout
    done = cli(*base, "--replications", "1")
    assert done.returncode == 0 and "the fits alone" in done.stdout
    done = cli(*base, "--replications", "0")
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "--replications" in done.stderr


def _outcome(batch: int) -> SimulatedOutcome:
    return SimulatedOutcome([0.1], [0.01], 0, {"e0": 1}, {"e0": 0}, {"e0": batch})


@pytest.mark.parametrize(
    ("over", "refused"), [(0, False), (5, False), (6, True)], ids=["none", "5-of-100", "6-of-100"]
)
def test_a_few_replications_may_outgrow_the_domain(over: int, refused: bool) -> None:
    """Up to 5 % of the replications may need a decode batch beyond the profiled concurrency (they
    count as they ran); more, and the rate is refused naming how many; the fits alone, never."""
    model = FleetModel([], {}, {}, {"e0": 4})
    runs = [_outcome(6)] * over + [_outcome(3)] * (100 - over)
    problems = beyond_domain(model, runs)
    assert bool(problems) is refused
    if refused:
        assert problems == [
            "e0 reaches 6 decoding sequences in 6 of 100 replications, beyond the profiled decode "
            "domain (concurrency up to 4)"
        ]
    assert beyond_domain(model, [_outcome(5)]) == [
        "e0 reaches 5 decoding sequences, beyond the profiled decode domain (concurrency up to 4)"
    ]


def test_a_late_request_does_not_hold_back_the_next() -> None:
    """With TTFT noise a request can be ready after the one behind it: the queue is in order of
    readiness, ties in order of arrival."""
    waiting: deque[_Seq] = deque()
    for req, ready in enumerate([0.10, 0.35, 0.20, 0.35, 0.05]):
        _enqueue(waiting, _Seq(req, 512, 16, ready))
    assert [s.req for s in waiting] == [4, 0, 2, 1, 3]
