"""``compare A B`` on run folders written by hand: the verdicts' signs, the refusals, the files."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from narwhal_trial import Manifest
from narwhal_trial._errors import NotComparableError
from narwhal_trial.compare._compare import CompareRequest, compare_sides

from ..report.test_report_edge import write_edge_fixture
from ._run_kit import write_lognormal_run as _run
from .conftest import Cli


def test_a_slower_decode_is_worse_with_the_right_sign(tmp_path: Path) -> None:
    a, b = (
        _run(tmp_path / "a", 1),
        _run(tmp_path / "b", 2, tpot_factor=1.15),
    )
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
    a, b = (
        _run(tmp_path / "a", 1),
        _run(tmp_path / "b", 2, tpot_factor=1.15),
    )
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


def _edit_manifest(run: Path, **changes: str) -> None:
    """Rewrite ``run``'s manifest.json with ``changes`` (still a valid manifest)."""
    path = run / "manifest.json"
    doc = orjson.loads(path.read_bytes())
    assert set(changes) <= set(doc)
    path.write_bytes(orjson.dumps(doc | changes))
    Manifest.model_validate_json(path.read_bytes())


def _refused(cli: Cli, tmp_path: Path, *args: str) -> str:
    """``compare ARGS --out FILE`` exits 1 with one stderr line, nothing on stdout and no FILE;
    the line."""
    out = tmp_path / "refused.json"
    done = cli("compare", *args, "--out", str(out))
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout == "" and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("load_trial.py: error: "), done.stderr
    assert not out.exists()
    return done.stderr


def test_different_workloads_are_refused_unless_allowed(tmp_path: Path, cli: Cli) -> None:
    """B's manifest names another workload file (its SHA-256): refused in one line naming both,
    until ``--allow-different-workloads``, which compares and says the workloads differ."""
    a, b = _run(tmp_path / "a", 1), _run(tmp_path / "b", 2)
    _edit_manifest(b, workload_digest="12" * 32)
    line = _refused(cli, tmp_path, str(a), str(b))
    assert "A and B ran different workloads: A " in line
    assert "(abababababab)" in line and "(121212121212)" in line
    assert "--allow-different-workloads" in line
    out = tmp_path / "allowed.json"
    done = cli("compare", str(a), str(b), "--allow-different-workloads", "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "   the workloads differ (--allow-different-workloads)" in done.stdout
    doc = json.loads(out.read_text())
    assert doc["workloads_differ"] is True and doc["exit_code"] == 0
    assert any(d["what"] == "workload" for d in doc["differences"])


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [("tpot_s", "0.05", "TPOT bound 0.0333 against 0.05"), ("attainment", "0.9",
     "attainment 0.95 against 0.9"), ("ttft_s", "2.5", "TTFT bound 2 against 2.5")],
)  # fmt: skip
def test_different_targets_are_refused(
    tmp_path: Path, cli: Cli, field: str, value: str, words: str
) -> None:
    """A side judged by another TTFT bound, TPOT bound or attainment target is not compared,
    even with ``--allow-different-workloads``."""
    a, b = _run(tmp_path / "a", 1), _run(tmp_path / "b", 2)
    _edit_manifest(b, **{field: value})
    line = _refused(cli, tmp_path, str(a), str(b), "--allow-different-workloads")
    assert "A and B were judged by different targets: " + words in line, line


def test_a_folder_that_is_not_a_run_is_refused(tmp_path: Path, cli: Cli) -> None:
    """A folder holding no run folder, a file, and a run folder whose summary is missing."""
    a = _run(tmp_path / "a", 1)
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("not a run\n")
    line = _refused(cli, tmp_path, str(a), str(empty))
    assert f"B {empty} is not a run folder, an edge folder or a folder of run folders" in line
    line = _refused(cli, tmp_path, str(empty / "notes.txt"), str(a))
    assert f"A {empty / 'notes.txt'} is not a run folder" in line
    broken = _run(tmp_path / "broken", 2)
    (broken / "summary.json").unlink()
    line = _refused(cli, tmp_path, str(a), str(broken))
    assert str(broken / "summary.json") in line


def test_an_invalid_schedule_is_refused_by_the_command(tmp_path: Path, cli: Cli) -> None:
    """The command's refusal of a side whose client fell behind: one line naming the run."""
    a, bad = (
        _run(tmp_path / "a", 1),
        _run(tmp_path / "b", 2, valid=False),
    )
    line = _refused(cli, tmp_path, str(a), str(bad))
    assert f"B {bad}: the client did not keep its schedule" in line


@pytest.mark.parametrize("confidence", ["2", "0.3", "1"])
def test_a_confidence_out_of_range_is_refused(tmp_path: Path, cli: Cli, confidence: str) -> None:
    """``--confidence`` outside [0.5, 0.999]: one line, before either side is read."""
    a = _run(tmp_path / "a", 1)
    line = _refused(cli, tmp_path, str(a), str(tmp_path / "nope"), "--confidence", confidence)
    assert f"--confidence must be in [0.5, 0.999], got {confidence}" in line


def test_an_edge_with_a_repeated_invalid_trial_compares_its_judged_trials(tmp_path: Path) -> None:
    """The search repeated the trial whose client fell behind; that trial is left out of the
    pairs, not a reason to refuse the edge."""
    a = write_edge_fixture(tmp_path / "a")
    b = write_edge_fixture(tmp_path / "b")
    doc = compare_sides(CompareRequest(a, b))
    assert doc.edge is not None and doc.edge.verdict == "no detectable difference"
    invalid = [r for r in json.loads((a / "edge.json").read_text())["trials"]
               if not r["client_schedule_valid"]]  # fmt: skip
    assert invalid and all(p.run_a != str(a / t["run"]) for p in doc.pairs for t in invalid)
    assert doc.pairs and doc.exit_code == 0


def test_what_differs_names_the_engine_version(tmp_path: Path) -> None:
    """The engine's version each run recorded (GET /version) is listed when it differs."""
    a, b = _run(tmp_path / "a", 1), _run(tmp_path / "b", 2)
    for side, version in ((a, "0.11.0"), (b, "0.12.0")):
        doc = json.loads((side / "manifest.json").read_bytes())
        doc["server_version"] = version
        (side / "manifest.json").write_text(json.dumps(doc))
    found = {d.what: (d.a, d.b) for d in compare_sides(CompareRequest(a, b)).differences}
    assert found["engine version"] == ("0.11.0", "0.12.0")
