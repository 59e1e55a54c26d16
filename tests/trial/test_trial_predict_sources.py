"""Each source of ``predict``'s spread, one at a time, and a probe's measured engine speed
(docs/design.md §11, "Sources of spread")."""

from __future__ import annotations

import dataclasses
import json
import math
import random
import statistics
from fractions import Fraction
from math import comb
from pathlib import Path

import pytest

from narwhal_store import read_store
from narwhal_trial._stats import binomial_width
from narwhal_trial.predictor._buckets import good_flags
from narwhal_trial.predictor._model import FleetModel
from narwhal_trial.predictor._predict import PredictRequest, load_model
from narwhal_trial.predictor._rates import predict_rate
from narwhal_trial.predictor._sources import source_goods
from narwhal_trial.predictor._spread import (
    EngineReplica,
    EngineSpread,
    FleetSpread,
    Source,
    engine_spread,
)
from narwhal_trial.predictor._vtime import simulate

from .conftest import Cli
from .test_trial_predict_spread import L, _request, _spread_store

#: Near 2 request/s of 0.5 s prefills the queue decides: replications pass or miss by their speed.
EDGE = 1.95


def _engine(tmp_path: Path) -> EngineSpread:
    """The spread store's engine: each length's repeats at 0.8, 1.0 and 1.2 of their median, so
    its speed history is those three."""
    _, store = _spread_store(tmp_path)
    loaded = read_store(store)
    profile = loaded.store.profiles[0]
    return engine_spread(profile, loaded.samples(profile.key), 128)


def _model(tmp_path: Path) -> tuple[FleetModel, PredictRequest]:
    """The spread store's fleet model for a 2-token trial near its edge, and the request."""
    fleet, store = _spread_store(tmp_path)
    req = _request(fleet, store, rate=EDGE, replications=30, out=2)
    model, _ = load_model(req)
    return model, req


def _without_history(model: FleetModel) -> FleetModel:
    """``model`` with its engines' speed history left out."""
    spreads = {i: dataclasses.replace(s, speed=()) for i, s in model.spread.engines.items()}
    return dataclasses.replace(model, spread=FleetSpread(spreads), _replicas={})


def _old_replica(
    spreads: dict[str, EngineSpread], seed: int, index: int
) -> tuple[dict[str, tuple[list[float], list[float], list[float], list[float]]], list[float]]:
    """A replication as it was drawn before the sources could vary one at a time: per engine (in
    iid order) the levels' and pools' bootstrap and one speed from the sweep, then the requests'
    uniforms, all from one generator."""
    rng = random.Random(f"narwhal-predict:{seed}:{index}")

    def resample(values: tuple[float, ...]) -> list[float]:
        return [values[rng.randrange(len(values))] for _ in values]

    engines = {}
    for iid, s in sorted(spreads.items()):
        prefill = [statistics.median(resample(p.factors)) for p in s.prefill]
        decode = [statistics.median(resample(p.levels)) for p in s.decode]
        ttft, tpot = sorted(resample(s.ttft_noise_s)), sorted(resample(s.tpot_noise_s))
        speed = s.speed[rng.randrange(len(s.speed))] if s.speed else 1.0
        engines[iid] = ([v * speed for v in prefill], [v * speed for v in decode], ttft, tpot)
    return engines, [rng.random() for _ in range(40)]


def test_every_source_varying_draws_as_before(tmp_path: Path) -> None:
    """By default a replication draws the same numbers in the same order as before the sources
    existed: the same levels, speeds, noise pools and request uniforms, bit for bit."""
    spread = _engine(tmp_path)
    spreads = {"e1": dataclasses.replace(spread, speed=(0.9, 1.1)), "e0": spread}
    for index in range(5):
        replica = FleetSpread(spreads).replica(3, index)
        old, uniforms = _old_replica(spreads, 3, index)
        for iid, (prefill, decode, ttft, tpot) in old.items():
            mine, s = replica.engines[iid], spreads[iid]
            assert [mine.prefill_level(p.length) for p in s.prefill] == prefill
            assert [mine.decode_level(p.concurrency, p.ctx) for p in s.decode] == decode
            assert [mine.ttft_noise((k + 0.5) / len(ttft)) for k in range(len(ttft))] == ttft
            assert [mine.tpot_noise((k + 0.5) / len(tpot)) for k in range(len(tpot))] == tpot
            assert mine.prefill_speed == mine.decode_speed == mine.speed
        assert [u for k in range(20) for u in replica.draws(k)] == uniforms


_State = tuple[
    float, float, tuple[float, ...], tuple[float, ...], tuple[float, ...], tuple[float, ...]
]


def _state(replica: EngineReplica, spread: EngineSpread) -> _State:
    """A replica's speeds, levels at every profiled point and noise at 50 quantiles."""
    return (
        replica.prefill_speed,
        replica.decode_speed,
        tuple(replica.prefill_level(p.length) for p in spread.prefill),
        tuple(replica.decode_level(p.concurrency, p.ctx) for p in spread.decode),
        tuple(replica.ttft_noise(k / 50) for k in range(50)),
        tuple(replica.tpot_noise(k / 50) for k in range(50)),
    )


@pytest.mark.parametrize("source", ["engine_speed", "fits_bootstrap", "request_noise"])
def test_one_source_varies_and_the_others_sit_at_their_centre(
    tmp_path: Path, source: Source
) -> None:
    """With one source varying, replications differ in it alone: the others are the same in
    every replication, at their centre (speed 1, every level its repeats' median, the pools
    whole, one fixed sequence of request uniforms)."""
    spread = _engine(tmp_path)
    fleet = FleetSpread({"e0": spread})
    replicas = [fleet.replica(0, r, frozenset({source})) for r in range(12)]
    states = [_state(r.engines["e0"], spread) for r in replicas]
    draws = [tuple(r.draws(k) for k in range(10)) for r in replicas]
    centre = _state(EngineReplica(spread, random.Random(0), frozenset()), spread)
    speeds = {(s[0], s[1]) for s in states}
    assert (len(speeds) > 1) is (source == "engine_speed")
    assert (len({s[2:] for s in states}) > 1) is (source != "request_noise")
    assert (len(set(draws)) > 1) is (source == "request_noise")
    if source != "engine_speed":
        assert speeds == {(1.0, 1.0)}
    if source != "fits_bootstrap":
        assert {s[4:] for s in states} == {centre[4:]}
    if source == "request_noise":
        assert set(states) == {centre}
        medians = [statistics.median(p.factors) for p in spread.prefill]
        assert list(centre[2]) == pytest.approx(medians)
        assert centre[4] == tuple(
            sorted(spread.ttft_noise_s)[int(k / 50 * len(spread.ttft_noise_s))] for k in range(50)
        )


def test_without_a_speed_history_the_engine_speed_spreads_nothing(tmp_path: Path) -> None:
    """Only the engine's speed varying and no history to draw it from: every replication is the
    same trial, and its width is 0, while the fits' bootstrap alone still spreads the attainment;
    with the sweep's history the speed alone spreads it."""
    swept, req = _model(tmp_path)
    model = _without_history(swept)
    replicas = model.replicas(0, 30, frozenset({"engine_speed"}))
    runs = [simulate(model.engines, req.shape, EDGE, replica) for replica in replicas]
    assert all(o.ttft == runs[0].ttft and o.tpot == runs[0].tpot for o in runs)
    goods = source_goods(model, req.shape, req.target, EDGE, 30, 0, "engine_speed")
    assert goods == [sum(good_flags(runs[0], req.target))] * 30
    p = predict_rate(model, req.shape, req.target, EDGE, 30)
    assert p.spread_sources is not None
    assert p.spread_sources.engine_speed == 0.0
    assert p.spread_sources.fits_bootstrap > 0.1
    q = predict_rate(swept, req.shape, req.target, EDGE, 30)
    assert q.spread_sources is not None and q.spread_sources.engine_speed > 0.1
    assert q.spread_sources.speed_from == "sweep"


def test_a_probes_factors_replace_the_sweep_for_their_side(tmp_path: Path) -> None:
    """Probe factors for the prefill: each replication's prefill speed is the median of a
    resample of them (inside their range, never the sweep's 0.8-1.2), every prefill level is the
    speed-less level times it; the decode side still draws from the sweep's history."""
    spread = _engine(tmp_path)
    probe = (1.5, 1.6, 1.7, 1.9)
    probed = dataclasses.replace(spread, probe_prefill=probe)
    bare = dataclasses.replace(spread, speed=())
    prefill_speeds, decode_speeds = set(), set()
    for seed in range(40):
        one = EngineReplica(probed, random.Random(seed))
        plain = EngineReplica(bare, random.Random(seed))
        assert min(probe) <= one.prefill_speed <= max(probe)
        prefill_speeds.add(one.prefill_speed)
        decode_speeds.add(round(one.decode_speed, 9))
        for p in spread.prefill:
            assert one.prefill_level(p.length) == pytest.approx(
                plain.prefill_level(p.length) * one.prefill_speed
            )
        for d in spread.decode:
            assert one.decode_level(d.concurrency, d.ctx) == pytest.approx(
                plain.decode_level(d.concurrency, d.ctx) * one.decode_speed
            )
    assert len(prefill_speeds) > 1
    assert decode_speeds == {0.8, 1.0, 1.2}
    fleet = FleetSpread({"e0": probed})
    assert fleet.speed_from == "probe" and FleetSpread({"e0": spread}).speed_from == "sweep"
    centre = fleet.replica(0, 0, frozenset({"fits_bootstrap"})).engines["e0"]
    assert (centre.prefill_speed, centre.decode_speed) == (1.65, 1.0)  # the probe's median


def test_equal_probe_factors_scale_every_prefill_level(tmp_path: Path) -> None:
    """Probe factors all 1.2 (both sides): every replication's prefill level is 1.2 times the
    level without any speed, whatever the sweep's history; the decode likewise at 0.9."""
    spread = _engine(tmp_path)
    probed = dataclasses.replace(spread, probe_prefill=(1.2,) * 5, probe_decode=(0.9,) * 3)
    bare = dataclasses.replace(spread, speed=())
    for seed in range(20):
        one = EngineReplica(probed, random.Random(seed))
        plain = EngineReplica(bare, random.Random(seed))
        for p in spread.prefill:
            assert one.prefill_level(p.length) == pytest.approx(1.2 * plain.prefill_level(p.length))
        for d in spread.decode:
            level = plain.decode_level(d.concurrency, d.ctx)
            assert one.decode_level(d.concurrency, d.ctx) == pytest.approx(0.9 * level)


def test_a_probes_weight_shrinks_its_factor_and_the_unseen_drift_spreads_it(
    tmp_path: Path,
) -> None:
    """Probe factors all 1.6 at weight 0.25: the speed at the centre is 1.6 ** 0.25 on both
    sides; drawn, it is that times a log-normal drift whose log spread is the side's own (0.06
    for the decode, none for the prefill here)."""
    spread = _engine(tmp_path)
    probed = dataclasses.replace(
        spread,
        probe_prefill=(1.6,) * 5,
        probe_decode=(1.6,) * 5,
        probe_weight=0.25,
        unseen_sd=(0.0, 0.06),
    )
    centre = EngineReplica(probed, random.Random(0), frozenset())
    assert (centre.prefill_speed, centre.decode_speed) == (1.6**0.25, 1.6**0.25)
    drawn = [EngineReplica(probed, random.Random(seed)) for seed in range(400)]
    assert {r.prefill_speed for r in drawn} == {1.6**0.25}
    logs = [math.log(r.decode_speed / 1.6**0.25) for r in drawn]
    assert abs(statistics.mean(logs)) < 0.01
    assert 0.05 < statistics.stdev(logs) < 0.07


def test_trial_sampling_is_the_exact_binomial_width() -> None:
    """A 60-request trial whose requests are each good with probability 0.9: the 5th and 95th
    percentiles (nearest rank) of its good count are 50 and 58, so the width is 8/60; the same
    from exact fractions. No width where nothing can vary."""
    cumulative, low, high = Fraction(0), None, None
    p = Fraction(9, 10)
    for k in range(61):
        cumulative += comb(60, k) * p**k * (1 - p) ** (60 - k)
        low = k if low is None and cumulative >= Fraction(1, 20) else low
        if cumulative >= Fraction(19, 20):
            high = k
            break
    assert (low, high) == (50, 58)
    assert binomial_width(60, 0.9) == pytest.approx(8 / 60)
    assert binomial_width(200, 1.0) == binomial_width(200, 0.0) == binomial_width(0, 0.5) == 0.0
    assert binomial_width(10_000, 0.5) == pytest.approx(2 * 1.645 * 0.005, rel=0.02)


def test_cli_reports_each_sources_width(cli: Cli, tmp_path: Path) -> None:
    """``--json`` with 50 replications holds the four widths, each an attainment in [0, 1], and
    the text one line of them; one replication has neither."""
    fleet, store = _spread_store(tmp_path)
    base = [
        "predict", "--fleet", str(fleet), "--profiles", str(store), "--input-tokens", str(L),
        "--output-tokens", "2", "--requests", "200", "--ttft", "2", "--tpot", "1",
        "--attainment", "0.95", "--rate", str(EDGE),
    ]  # fmt: skip
    done = cli(*base, "--replications", "50", "--json")
    assert done.returncode in (0, 2), done.stderr
    sources = json.loads(done.stdout)["prediction"]["spread_sources"]
    widths = ("engine_speed", "fits_bootstrap", "request_noise", "trial_sampling")
    assert set(sources) == {*widths, "requests", "speed_from"}
    assert all(0.0 <= sources[w] <= 1.0 for w in widths)
    assert sources["engine_speed"] > 0 and sources["requests"] == 200
    assert sources["speed_from"] == "sweep"
    done = cli(*base, "--replications", "50")
    assert "  spread (5-95 % width) from: engine speed " in done.stdout
    assert "(sweep), fits " in done.stdout and ", trial of 200 requests " in done.stdout
    done = cli(*base, "--replications", "1", "--json")
    assert done.returncode in (0, 2), done.stderr
    assert "spread_sources" not in json.loads(done.stdout)["prediction"]
    assert "spread (5-95" not in cli(*base, "--replications", "1").stdout
