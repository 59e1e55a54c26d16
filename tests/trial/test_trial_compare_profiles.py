"""``compare --profiles A B`` on profile stores written by hand, their fits refitted from noisy
raw samples (B's decode slower, or one fleet measured twice): the verdicts, the text, the
refusals."""

from __future__ import annotations

import json
import math
from pathlib import Path
from statistics import NormalDist

import numpy as np
import pytest

from narwhal_fit import DecodePoint, fit_decode, fit_prefill, median_by_length
from narwhal_store import DecodeSample
from narwhal_trial._errors import NotComparableError, ReadError
from narwhal_trial.compare._compare import CompareRequest, compare_sides
from narwhal_trial.compare._profiles import cohort_blocks, compare_profiles, profile_comparer
from narwhal_trial.documents._comparison import FitChange

from ._run_kit import write_run
from ._store_kit import decode_sample, prefill_sample, write_profiles
from .conftest import Cli

LENGTHS = [1024, 2048, 4096, 8192]
INPUT_LENS = [1024, 4096]
LEVELS = [1, 4]
PREFILL = {"a": 0.012, "b": 2e-5, "c": 5e-10}
DECODE = {"d0": 0.005, "d1": 1e-4, "d2": 3e-8}
TOKENS = 64  # tokens a decode stream: 63 intervals, 7 blocks of 8
PREFILL_NOISE, STEP_NOISE = 0.03, 0.1  # lognormal sigmas of a TTFT repeat and of a decode step


def _store(
    folder: Path,
    seed: int,
    *,
    decode_factor: float = 1.0,
    prefill_factor: float = 1.0,
    iid: str = "e0",
    lengths: list[int] = LENGTHS,
) -> Path:
    """One engine's store: five TTFT repeats a length and one cohort a decode point drawn around
    the true latencies (times ``prefill_factor`` and ``decode_factor``), and the fits narwhal-fit
    makes of them."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True)
    fleet = folder / "fleet.json"
    fleet.write_text(json.dumps({
        "format": "narwhal.fleet", "format_version": 1,
        "profiles": {"path": "profiles/fleet-profiles.json"},
        "engines": [{"iid": iid, "role": "mixed", "url": "http://127.0.0.1:9100"}],
    }))  # fmt: skip
    ttfts = {
        n: (_ttft(n) * prefill_factor * rng.lognormal(0, PREFILL_NOISE, 5)).tolist()
        for n in lengths
    }  # fmt: skip
    cohorts, points = [], []
    for length in INPUT_LENS:
        for n in LEVELS:
            ctx = length + (TOKENS - 1) / 2
            steps = _tpot(n, ctx) * decode_factor * rng.lognormal(0, STEP_NOISE, TOKENS - 1)
            tpot = float(np.mean(steps))
            cohorts.append(decode_sample(length, [steps.tolist()] * n, tpot, ctx))
            points.append(DecodePoint(n, ctx, tpot, length))
    medians = median_by_length(ttfts)
    prefill = fit_prefill(list(medians), list(medians.values()))
    decode = fit_decode(points)
    return write_profiles(
        fleet, lengths, INPUT_LENS, (decode.mean_rel_error, decode.worst_rel_error),
        fits={iid: (prefill.coefficients, decode.coefficients)},
        prefill_worst=prefill.mean_rel_error, concurrency=LEVELS,
        samples=([prefill_sample(n, t) for n, t in ttfts.items()], cohorts),
    )  # fmt: skip


def _ttft(n: float) -> float:
    return PREFILL["a"] + PREFILL["b"] * n + PREFILL["c"] * n * n


def _tpot(n: float, ctx: float) -> float:
    return DECODE["d0"] + DECODE["d1"] * n + DECODE["d2"] * n * ctx


def _compare(a: Path, b: Path, seed: int = 0) -> list[FitChange]:
    return compare_profiles(a, b, confidence=0.95, rng=np.random.default_rng(seed))


def test_a_slower_decode_is_worse_and_an_equal_prefill_is_not(tmp_path: Path) -> None:
    a = _store(tmp_path / "a", 1)
    b = _store(tmp_path / "b", 2, decode_factor=1.15)
    changes = _compare(a, b)
    prefill = [c for c in changes if c.phase == "prefill"]
    decode = [c for c in changes if c.phase == "decode"]
    assert [c.at for c in prefill] == [f"{n} tokens" for n in LENGTHS]
    assert [c.at for c in decode] == [
        f"concurrency {n} at {length} tokens" for length in INPUT_LENS for n in LEVELS
    ]
    assert {c.verdict for c in prefill} == {"no detectable difference"}
    for c in decode:
        assert c.verdict == "worse" and 1 < c.low < c.ratio < c.high, c
        assert c.ratio == pytest.approx(1.15, abs=0.04)
        assert c.ratio == pytest.approx(c.b_s / c.a_s)
    back = _compare(b, a)
    assert {c.verdict for c in back if c.phase == "decode"} == {"better"}


def test_one_fleet_profiled_twice_tells_no_difference(tmp_path: Path) -> None:
    changes = _compare(_store(tmp_path / "a", 3), _store(tmp_path / "b", 4))
    assert len(changes) == len(LENGTHS) + len(INPUT_LENS) * len(LEVELS)
    assert {c.verdict for c in changes} == {"no detectable difference"}
    assert all(c.low < 1 < c.high for c in changes)


def test_the_seed_fixes_the_intervals(tmp_path: Path) -> None:
    a, b = _store(tmp_path / "a", 5), _store(tmp_path / "b", 6, decode_factor=1.15)
    assert _compare(a, b, seed=7) == _compare(a, b, seed=7)
    assert _compare(a, b, seed=7) != _compare(a, b, seed=8)


def test_without_a_shared_length_the_fits_own_errors_stand_in(tmp_path: Path) -> None:
    a = _store(tmp_path / "a", 1)
    other = [1500, 3000, 6000, 12000]  # none of A's lengths; in common: 1,500 to 8,192
    b = _store(tmp_path / "b", 2, lengths=other)
    same = [c for c in _compare(a, b) if c.phase == "prefill"]
    assert [c.at for c in same] == ["1500 tokens", "3505 tokens", "8192 tokens"]
    z = NormalDist().inv_cdf(0.975)
    residuals = math.hypot(*(_prefill_error(s) * math.sqrt(math.pi / 2) for s in (a, b)))
    for c in same:
        half = math.log(c.high / c.ratio)
        assert half == pytest.approx(math.log(c.ratio / c.low))  # symmetric: not a bootstrap
        assert half > z * residuals  # the medians' noise widens the residuals' interval
        assert c.verdict == "no detectable difference"
    slower = _store(tmp_path / "c", 2, lengths=other, prefill_factor=1.3)
    worse = [c for c in _compare(a, slower) if c.phase == "prefill"]
    assert {c.verdict for c in worse} == {"worse"}
    assert all(c.ratio == pytest.approx(1.3, abs=0.05) for c in worse)


def _prefill_error(store: Path) -> float:
    return float(json.loads(store.read_text())["profiles"][0]["prefill_fit"]["mean_rel_error"])


def test_a_cohort_s_blocks_average_its_streams_inside_the_window() -> None:
    gaps = [0.010] * 16 + [0.020] * 16
    doc = decode_sample(1024, [gaps, gaps], 0.015, 1040.0)
    early = doc["streams"][1]  # its first 8 tokens, 50 ms apart, come before the window opens
    first = early["chunk_ns"][0]
    early["chunk_ns"] = [first - k * 50_000_000 for k in range(8, 0, -1)] + early["chunk_ns"]
    early["chunk_tokens"] = [1] * len(early["chunk_ns"])
    cohort = DecodeSample.model_validate(doc)
    assert cohort_blocks(cohort) == pytest.approx([0.010, 0.010, 0.020, 0.020])
    short = DecodeSample.model_validate(decode_sample(1024, [[0.01] * 5], 0.01, 1026.0))
    assert cohort_blocks(short) == []


def test_the_comparison_counts_a_worse_fit(tmp_path: Path) -> None:
    a, b = _sides(tmp_path)
    profiles = profile_comparer(
        _store(tmp_path / "pa", 1), _store(tmp_path / "pb", 2, decode_factor=1.15)
    )
    doc = compare_sides(CompareRequest(a, b, profiles=profiles))
    assert doc.exit_code == 2
    assert "e0 decode at concurrency 4 at 4096 tokens" in doc.worse


def test_refusals_name_the_store(tmp_path: Path) -> None:
    a = _store(tmp_path / "a", 1)
    with pytest.raises(ReadError, match=r"--profiles B .*nope\.json does not exist"):
        _compare(a, tmp_path / "nope.json")
    with pytest.raises(ReadError, match=r"--profiles A: not a profile store.*fleet\.json"):
        _compare(tmp_path / "a" / "fleet.json", a)
    other = _store(tmp_path / "b", 2, iid="f0")
    with pytest.raises(NotComparableError, match=r"share no engine: A .* holds e0, B .* holds f0"):
        _compare(a, other)


def _sides(tmp_path: Path) -> tuple[Path, Path]:
    """Two run folders of the same timings: the runs alone judge no difference."""
    rng = np.random.default_rng(11)
    ttft = rng.lognormal(np.log(0.4), 0.25, 100).tolist()
    tpot = rng.lognormal(np.log(0.02), 0.1, 100).tolist()
    shape = {"rate": 4.0, "input_tokens": 8192, "output_tokens": 128}
    a = write_run(tmp_path / "run-a", **shape, ttft_s=ttft, tpot_s=tpot)
    return a, write_run(tmp_path / "run-b", **shape, ttft_s=ttft, tpot_s=tpot)


def test_the_command_prints_a_line_per_engine_and_exits_2(tmp_path: Path, cli: Cli) -> None:
    a, b = _sides(tmp_path)
    pa, pb = _store(tmp_path / "pa", 1), _store(tmp_path / "pb", 2, decode_factor=1.15)
    out = tmp_path / "comparison.json"
    done = cli("compare", str(a), str(b), "--profiles", str(pa), str(pb), "--out", str(out))
    assert done.returncode == 2, done.stderr
    lines = done.stdout.splitlines()
    summary = next(line for line in lines if line.startswith("   e0: "))
    assert summary.startswith("   e0: prefill no detectable change, decode up to 1")
    assert "% slower (4 of 4 points, most at concurrency" in summary
    assert any(line.startswith("      prefill at 8,192 tokens: ") for line in lines)
    doc = json.loads(out.read_text())
    assert len(doc["profiles"]) == 8 and doc["exit_code"] == 2
    same = cli("compare", str(a), str(b), "--profiles", str(pa), str(_store(tmp_path / "pc", 3)))
    assert same.returncode == 0, same.stderr
    assert "   e0: prefill no detectable change, decode no detectable change" in same.stdout


@pytest.mark.parametrize("case", ["missing", "not a store", "no sidecar", "no engine in common"])
def test_the_command_refuses_bad_stores_in_one_line(tmp_path: Path, cli: Cli, case: str) -> None:
    a, b = _sides(tmp_path)
    pa = _store(tmp_path / "pa", 1)
    pb = {
        "missing": lambda: tmp_path / "nope.json",
        "not a store": lambda: tmp_path / "run-b" / "summary.json",
        "no sidecar": lambda: _without_sidecar(_store(tmp_path / "pb", 2)),
        "no engine in common": lambda: _store(tmp_path / "pb", 2, iid="f0"),
    }[case]()
    out = tmp_path / "comparison.json"
    done = cli("compare", str(a), str(b), "--profiles", str(pa), str(pb), "--out", str(out))
    assert done.returncode == 1, done.stdout
    assert done.stdout == "" and done.stderr.count("\n") == 1
    assert done.stderr.startswith("load_trial.py: error: ")
    assert str(pb.parent) in done.stderr
    assert not out.exists()


def _without_sidecar(store: Path) -> Path:
    store.with_suffix(".samples.json").unlink()
    return store
