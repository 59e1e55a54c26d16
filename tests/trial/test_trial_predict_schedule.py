"""``predict --workload``: a scheduled workload's own arrivals and lengths, scaled by --speedup.

The fleet is one mixed engine on hand-made fits (``_store_kit``): a 1024-token prompt takes 0.1 s
of GPU time and decode costs 5 ms a step, so the answers follow the queue the arrivals make.
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest

from narwhal_trial.cli._predict_workload import workload_shape
from narwhal_trial.documents._prediction import Prediction, RatePrediction
from narwhal_trial.predictor._model import OutsideDomainError, TrialTarget
from narwhal_trial.predictor._predict import PredictRequest, predict
from narwhal_trial.predictor._vtime import TrialShape
from narwhal_trial.predictor._workload import WorkloadFacts
from narwhal_trial.workload._file import (
    BLOCK_SAMPLER,
    Sampling,
    SeedPrompt,
    Workload,
    workload_bytes,
)
from narwhal_trial.workload._schedule import Schedule, SyntheticSource

from ._store_kit import write_profiles
from .conftest import Cli

LENGTHS = [256, 512, 1024, 2048, 4096]
FITS = {"e0": ({"a": 0.01, "b": 1e-4, "c": 0.0}, {"d0": 0.005, "d1": 0.0, "d2": 0.0})}
_NS = 1_000_000_000
TTFT, TPOT = "0.5", "0.0333"


@pytest.fixture
def fleet_store(tmp_path: Path) -> tuple[Path, Path]:
    doc = {
        "format": "narwhal.fleet",
        "format_version": 1,
        "profiles": {"path": "profiles/fleet-profiles.json"},
        "engines": [{"iid": "e0", "role": "mixed", "url": "http://127.0.0.1:9100"}],
    }
    fleet = tmp_path / "fleet.json"
    fleet.write_text(json.dumps(doc))
    store = write_profiles(fleet, LENGTHS, [256, 4096], fits=FITS, concurrency=[1, 64])
    return fleet, store


def _workload(offsets_ns: list[int], inputs: list[int], outputs: list[int]) -> Workload:
    """A scheduled workload (synthetic source) of the given due offsets and lengths."""
    schedule = Schedule(
        source=SyntheticSource(
            arrivals="poisson",
            rate=1.0,
            input_lengths="1024",
            output_lengths="16",
            seed=0,
        ),
        due_offsets_ns=offsets_ns,
        input_tokens=inputs,
        output_tokens=outputs,
        block_tokens=16,
    )
    k = schedule.longest()
    return Workload(
        model="sim/tiny",
        max_model_len=32768,
        engine_version="0.33.0",
        pool=list(range(100, 132)),
        input_tokens=inputs[k],
        output_tokens=outputs[k],
        seed=0,
        sampler=BLOCK_SAMPLER,
        sampling=Sampling(min_tokens=outputs[k], max_tokens=outputs[k]),
        seed_prompt=SeedPrompt(
            name="x", sha256="0" * 64, completion_tokens=32, token_ids_source="return_token_ids"
        ),
        created="2026-11-30T00:00:00+00:00",
        schedule=schedule,
    )


def _write(folder: Path, workload: Workload, name: str = "workload.json") -> Path:
    path = folder / name
    path.write_bytes(workload_bytes(workload))
    return path


def _constant(n: int, rate: float, length: int = 1024, out: int = 16) -> Workload:
    return _workload([round(k / rate * _NS) for k in range(n)], [length] * n, [out] * n)


def _poisson(n: int, rate: float, seed: int, length: int = 1024, out: int = 16) -> Workload:
    gaps = np.random.default_rng(seed).exponential(1 / rate, size=n - 1)
    offsets = [0, *(round(t * _NS) for t in np.cumsum(gaps))]
    return _workload(offsets, [length] * n, [out] * n)


def _predict(
    fleet_store: tuple[Path, Path],
    path: Path | None,
    *,
    speedup: float | None = None,
    rate: float | None = None,
    requests: int | None = None,
    find: bool = False,
    shape: TrialShape | None = None,
    replications: int = 1,
) -> Prediction:
    fleet, store = fleet_store
    facts: WorkloadFacts | None = None
    if path is not None:
        shape, facts = workload_shape(path, requests=requests, speedup=speedup, rate=rate)
    assert shape is not None
    return predict(
        PredictRequest(
            fleet=fleet,
            profiles=store,
            limits=None,
            shape=shape,
            target=TrialTarget(Decimal(TTFT), Decimal(TPOT), Decimal("0.95")),
            rate=rate,
            find_max_rate=find,
            replications=replications,
            workload=facts,
            speedup=speedup,
        )
    )


def _at(doc: Prediction) -> RatePrediction:
    assert doc.prediction is not None
    return doc.prediction


def test_constant_schedule_equals_the_runbook(
    fleet_store: tuple[Path, Path], tmp_path: Path
) -> None:
    """A schedule of evenly spaced requests of one shape predicts what the runbook's trial at its
    rate does; speedup 2 is the runbook at twice the rate, on half the span."""
    path = _write(tmp_path, _constant(200, 8.0))
    for speedup in (1.0, 2.0):
        doc = _predict(fleet_store, path, speedup=speedup)
        runbook = _predict(fleet_store, None, rate=8.0 * speedup, shape=TrialShape(1024, 16, 200))
        p, r = _at(doc), _at(runbook)
        assert (p.good, p.attainment, p.passed, p.schedule_misses) == (
            r.good,
            r.attainment,
            r.passed,
            r.schedule_misses,
        )
        assert p.rate == pytest.approx(8.0 * speedup, rel=1e-9) and p.speedup == speedup
        assert p.ttft_s.p50 == pytest.approx(r.ttft_s.p50, rel=1e-6)
        assert p.tpot_s.p99 == pytest.approx(r.tpot_s.p99, rel=1e-6)
        w = doc.inputs.workload
        assert w is not None and w.source == "synthetic" and w.requests == 200
        assert w.span_s == pytest.approx(199 / 8.0)
        assert w.speedup == speedup and w.mean_rate == pytest.approx(8.0 * speedup)
    shape, _ = workload_shape(path, requests=None)
    assert shape.arrivals(2.0)[-1] == pytest.approx(shape.arrivals(1.0)[-1] / 2)
    # the runbook's document holds none of the scheduled keys
    dumped = runbook.model_dump(mode="json")
    assert "workload" not in dumped["inputs"] and "buckets" not in dumped["prediction"]


def test_poisson_arrivals_miss_more_than_constant(
    fleet_store: tuple[Path, Path], tmp_path: Path
) -> None:
    """At the same mean rate near the engine's capacity, Poisson arrivals queue where constant
    ones do not: their predicted attainment is lower, seed after seed."""
    n, rate = 400, 8.0  # a prompt and its 16 tokens hold the engine ~0.18 s: ~90 % busy
    constant = _at(_predict(fleet_store, _write(tmp_path, _constant(n, rate))))
    poisson = [
        _at(_predict(fleet_store, _write(tmp_path, _poisson(n, rate, seed), f"p{seed}.json")))
        for seed in range(10)
    ]
    assert constant.attainment == 1.0 and constant.passed
    figures = [p.attainment for p in poisson]
    assert all(a < constant.attainment for a in figures), figures
    assert sum(figures) / len(figures) < 0.9, figures


def test_find_max_rate_searches_the_speedup(fleet_store: tuple[Path, Path], tmp_path: Path) -> None:
    """--find-max-rate on a scheduled workload gives the highest passing speedup; on a constant
    schedule its mean rate is the runbook's highest passing rate."""
    path = _write(tmp_path, _constant(200, 4.0))
    doc = _predict(fleet_store, path, find=True)
    s = doc.search
    assert doc.prediction is None and s is not None
    assert s.axis == "speedup" and s.max_speedup is not None and s.max_rate is not None
    assert s.max_rate == pytest.approx(4.0 * s.max_speedup, rel=1e-9)
    assert s.at_max is not None and s.at_max.passed and s.at_max.speedup == s.max_speedup
    runbook = _predict(fleet_store, None, find=True, shape=TrialShape(1024, 16, 200))
    assert runbook.search is not None and runbook.search.max_rate is not None
    assert runbook.search.max_speedup is None and runbook.search.axis is None
    assert s.max_rate == pytest.approx(runbook.search.max_rate, rel=0.02)
    assert any(x > s.max_speedup and state == "miss" for x, state in s.tried)
    assert s.max_speedup <= 1000


def test_bucket_attainment_by_input_length(fleet_store: tuple[Path, Path], tmp_path: Path) -> None:
    """Each request keeps its own length: the buckets are summary.json's power-of-two ones, and
    the long prompts, which queue behind each other, are the ones that miss."""
    n = 90
    inputs = [300, 700, 3000] * (n // 3)
    outputs = [8, 32, 4] * (n // 3)
    path = _write(tmp_path, _workload([round(k * 0.16 * _NS) for k in range(n)], inputs, outputs))
    p = _at(_predict(fleet_store, path, speedup=1.0))
    assert p.buckets is not None
    assert [(b.low, b.high, b.requests) for b in p.buckets] == [
        (1, 512, 30),
        (512, 1024, 30),
        (2048, 4096, 30),
    ]
    assert sum(b.good for b in p.buckets) == p.good
    for b in p.buckets:
        assert b.attainment == b.good / b.requests
        assert b.low_attainment <= b.attainment <= b.high_attainment
    # a 300-token prompt's idle TTFT is 0.04 s; the 3000-token ones take 0.3 s of GPU each
    assert p.buckets[0].attainment == 1.0 and p.buckets[2].attainment < 0.5
    many = _at(_predict(fleet_store, path, speedup=1.0, replications=20))
    assert many.buckets is not None and len(many.buckets) == 3
    for b in many.buckets:
        assert b.low_attainment <= b.attainment <= b.high_attainment


def test_every_request_must_lie_inside_the_domain(
    fleet_store: tuple[Path, Path], tmp_path: Path
) -> None:
    """The longest request is inside the profiled domain, a short one is not: refused, naming it."""
    path = _write(tmp_path, _workload([0, _NS, 2 * _NS], [1024, 100, 1024], [16, 16, 16]))
    with pytest.raises(OutsideDomainError, match=r"e0: prefill domain: request 1: input 100"):
        _predict(fleet_store, path)


def test_cli_scheduled_text_json_and_errors(
    cli: Cli, fleet_store: tuple[Path, Path], tmp_path: Path
) -> None:
    """predict --workload prints the speedup, the mean rate and the buckets; the flags the
    workload holds, --speedup for the runbook's, a bad speedup and an unreadable workload are one
    line each, exit 1, and nothing written."""
    fleet, store = fleet_store
    sched = _write(tmp_path, _constant(40, 4.0))
    base = [
        "predict", "--fleet", str(fleet), "--profiles", str(store), "--ttft", TTFT,
        "--tpot", TPOT, "--attainment", "0.95", "--replications", "1",
    ]  # fmt: skip
    proc = cli(*base, "--workload", str(sched), "--speedup", "2")
    assert proc.returncode == 0, proc.stderr
    assert "speedup 2x (mean 8/s): predicted 40 good (need 38)" in proc.stdout
    assert f"workload {sched}: synthetic, 40 requests" in proc.stdout
    assert "  input [512, 1024)" not in proc.stdout and "  input [1024, 2048): 40/40" in proc.stdout
    out = tmp_path / "p.json"
    proc = cli(*base, "--workload", str(sched), "--find-max-rate", "--json", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    doc = Prediction.model_validate_json(out.read_bytes())
    assert doc.prediction is None  # --find-max-rate alone: the search only, from speedup 1
    assert doc.search is not None and doc.search.max_speedup is not None
    assert doc.search.tried[0] == (1.0, "pass")
    text = cli(*base, "--workload", str(sched), "--find-max-rate").stdout
    assert f"highest passing speedup: {doc.search.max_speedup:g}x (mean " in text

    runbook = tmp_path / "runbook.json"
    w = _constant(40, 4.0)
    runbook.write_bytes(
        workload_bytes(w.model_copy(update={"schedule": None, "sampler": "pool-uniform-v1"}))
    )
    same = cli(*base, "--workload", str(runbook), "--rate", "4", "--requests", "40", "--json")
    plain = cli(
        *base, "--input-tokens", "1024", "--output-tokens", "16", "--requests", "40",
        "--rate", "4", "--json",
    )  # fmt: skip
    assert same.returncode == plain.returncode == 0, same.stderr + plain.stderr
    got, want = (Prediction.model_validate_json(p.stdout) for p in (same, plain))
    assert got.prediction == want.prediction
    assert got.inputs.workload is not None and got.inputs.workload.source == "runbook"

    shape = (*base, "--input-tokens", "1024", "--output-tokens", "16", "--requests", "4")
    bad_json = tmp_path / "bad.json"
    bad_json.write_text("{")
    refused = {
        "rate": ((*base, "--workload", str(sched), "--rate", "1"), "--rate cannot be used"),
        "tokens": ((*base, "--workload", str(sched), "--input-tokens", "8"), "use --speedup"),
        "requests": ((*base, "--workload", str(sched), "--requests", "8"), "holds its 40"),
        "runbook-speedup": (
            (*base, "--workload", str(runbook), "--speedup", "2", "--requests", "4", "--rate", "1"),
            "--speedup applies to a scheduled workload",
        ),
        "no-workload-speedup": ((*shape, "--rate", "1", "--speedup", "2"), "applies to a sched"),
        "speedup-0": ((*base, "--workload", str(sched), "--speedup", "0"), "--speedup must be"),
        "speedup-big": ((*base, "--workload", str(sched), "--speedup", "2000"), "at most 1000"),
        "missing": ((*base, "--workload", str(tmp_path / "none.json")), "none.json"),
        "not-json": ((*base, "--workload", str(bad_json)), f"workload {bad_json} is not JSON"),
        "no-shape": ((*base, "--rate", "1"), "give --input-tokens and --output-tokens and"),
    }
    for name, (args, needle) in refused.items():
        target = tmp_path / f"{name}.json.out"
        proc = cli(*args, "--out", str(target))
        assert proc.returncode == 1, (name, proc.stderr)
        assert proc.stderr.count("\n") == 1 and needle in proc.stderr, (name, proc.stderr)
        assert "Traceback" not in proc.stderr and proc.stdout == "" and not target.exists()
