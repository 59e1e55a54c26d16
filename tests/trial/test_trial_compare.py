"""``compare A B`` on run folders written by hand: the verdicts' signs, the refusals, the files."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from narwhal_trial._errors import NotComparableError
from narwhal_trial.compare._compare import CompareRequest, compare_sides

from ._run_kit import write_run
from .conftest import Cli


def _run(out: Path, seed: int, *, tpot_factor: float = 1.0, valid: bool = True) -> Path:
    rng = np.random.default_rng(seed)
    ttft = rng.lognormal(np.log(0.4), 0.25, 200).tolist()
    tpot = (rng.lognormal(np.log(0.02), 0.1, 200) * tpot_factor).tolist()
    return write_run(
        out, rate=4.0, input_tokens=8192, output_tokens=128, ttft_s=ttft, tpot_s=tpot,
        schedule_valid=valid,
    )  # fmt: skip


def test_a_slower_decode_is_worse_with_the_right_sign(tmp_path: Path) -> None:
    a, b = _run(tmp_path / "a", 1), _run(tmp_path / "b", 2, tpot_factor=1.15)
    doc = compare_sides(CompareRequest(a, b))
    (pair,) = doc.pairs
    tpot50 = next(s for s in pair.latency if s.measure == "tpot" and s.quantile == 50)
    assert tpot50.verdict == "worse" and tpot50.low_s > 0
    assert 0.1 < tpot50.difference_s / tpot50.a_s < 0.2
    assert doc.exit_code == 2 and "TPOT p50 at 4 request/s" in doc.worse
    back = compare_sides(CompareRequest(b, a))
    assert next(s for s in back.pairs[0].latency if s.measure == "tpot").verdict == "better"


def test_two_runs_of_one_fleet_tell_no_difference(tmp_path: Path) -> None:
    doc = compare_sides(CompareRequest(_run(tmp_path / "a", 3), _run(tmp_path / "b", 4)))
    (pair,) = doc.pairs
    assert pair.attainment.verdict == "no detectable difference"
    assert {s.verdict for s in pair.latency} == {"no detectable difference"}
    assert doc.exit_code == 0 and doc.worse == []


def test_an_invalid_schedule_is_refused(tmp_path: Path) -> None:
    bad = _run(tmp_path / "b", 2, valid=False)
    with pytest.raises(NotComparableError, match="did not keep its schedule"):
        compare_sides(CompareRequest(_run(tmp_path / "a", 1), bad))


def test_the_command_writes_its_document_and_refuses_in_one_line(tmp_path: Path, cli: Cli) -> None:
    a, b = _run(tmp_path / "a", 1), _run(tmp_path / "b", 2, tpot_factor=1.15)
    out = tmp_path / "comparison.json"
    done = cli("compare", str(a), str(b), "--out", str(out))
    assert done.returncode == 2, done.stderr
    assert "verdict at 95%: worse: " in done.stdout
    doc = json.loads(out.read_text())
    assert doc["format"] == "narwhal.trial.comparison" and doc["exit_code"] == 2
    missing = cli("compare", str(a), str(tmp_path / "nope"), "--out", str(tmp_path / "c.json"))
    assert missing.returncode == 1
    assert missing.stderr.strip().count("\n") == 0 and "B " in missing.stderr
    assert not (tmp_path / "c.json").exists()
