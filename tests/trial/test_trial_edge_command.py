"""``edge``'s command body in process, with a fake ``run_trial``: ``edge.json`` after every trial,
the band start from hand-made profiles, repeats, errors, and bad input refused before anything is
created (the command line as a subprocess)."""

from __future__ import annotations

import json
import subprocess
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
import pytest

from narwhal_trial import TrialError
from narwhal_trial.documents._records import Summary
from narwhal_trial.edge._command import edge_command, predicted_band
from narwhal_trial.edge._document import EdgeSearch
from narwhal_trial.edge._search import round_rate
from narwhal_trial.edge._settings import EdgeSettings, predict_options
from narwhal_trial.run._settings import RunSettings
from narwhal_trial.run._summary import RunFacts, summarize
from narwhal_trial.workload._file import (
    Sampling,
    SeedPrompt,
    Workload,
    load_workload,
    workload_bytes,
)

from ._store_kit import write_profiles
from .conftest import LAUNCHER, trial_env


def _workload(folder: Path) -> Path:
    workload = Workload(
        model="sim/tiny",
        max_model_len=4096,
        engine_version="0.33.0",
        pool=[300, 301, 302],
        input_tokens=1024,
        output_tokens=32,
        seed=1729,
        sampling=Sampling(min_tokens=32, max_tokens=32),
        seed_prompt=SeedPrompt(
            name="t", sha256="0" * 64, completion_tokens=32, token_ids_source="return_token_ids"
        ),
        created="2026-12-01T00:00:00+00:00",
    )
    path = folder / "workload.json"
    path.write_bytes(workload_bytes(workload))
    return path


def _settings(tmp_path: Path, **kw: Any) -> EdgeSettings:
    run = RunSettings(
        base_url="http://127.0.0.1:9",
        workload_path=_workload(tmp_path),
        rate=1.0,
        requests=20,
        ttft_s=Decimal("0.05"),
        tpot_s=Decimal("0.0333"),
        attainment=Decimal("0.95"),
        out=tmp_path / "edge",
    )
    return EdgeSettings(run=run, out=tmp_path / "edge", **kw)


class FakeRun:
    """``run_trial`` at a fleet whose edge is ``edge`` request/s: it makes the run folder, checks
    that ``edge.json`` already lists every earlier trial, and answers a summary."""

    def __init__(
        self, edge: float, special: dict[int, dict[str, Any] | BaseException] | None = None
    ) -> None:
        self.edge = edge
        self.special = special or {}
        self.settings: list[RunSettings] = []

    def __call__(self, settings: RunSettings) -> Summary:
        self.settings.append(settings)
        index = len(self.settings)
        doc = EdgeSearch.model_validate_json((settings.out.parent / "edge.json").read_bytes())
        assert [t.index for t in doc.trials] == list(range(1, index))
        assert doc.stop is None and doc.exit_code is None
        settings.out.mkdir()
        special = self.special.get(index, {})
        if isinstance(special, BaseException):
            raise special
        facts = RunFacts(run_id=f"r{index}", requests=20, rate=settings.rate,
                         attainment=Decimal("0.95"), max_lag_s=0.05)  # fmt: skip
        passed = settings.rate <= self.edge
        base = summarize([], facts).model_copy(
            update={"good": 20 if passed else 3, "passed": passed, "exit_code": 0 if passed else 2}
        )
        return base.model_copy(update=special)


def _doc(tmp_path: Path) -> EdgeSearch:
    return EdgeSearch.model_validate_json((tmp_path / "edge" / "edge.json").read_bytes())


def test_doubling_search_writes_every_trial_and_the_bracket(tmp_path: Path) -> None:
    """1, 2, 4 pass, 8 misses, then midpoints to 5 %: each trial a run folder of its own,
    edge.json with every verdict and the bracket, one line per trial, exit 0."""
    lines: list[str] = []
    fake = FakeRun(5.3)
    code = edge_command(_settings(tmp_path), emit=lines.append, run=fake)
    doc = _doc(tmp_path)
    assert code == 0 == doc.exit_code and doc.stop == "within tolerance"
    assert [t.rate for t in doc.trials][:4] == [1.0, 2.0, 4.0, 8.0]
    assert [t.verdict for t in doc.trials][:4] == ["pass", "pass", "pass", "miss"]
    for trial, settings in zip(doc.trials, fake.settings, strict=True):
        assert settings.out == tmp_path / "edge" / trial.run
        assert settings.rate == trial.rate and settings.out.is_dir()
    assert doc.trials[0].run == "trial-01-rate-1" and doc.trials[3].run == "trial-04-rate-8"
    b = doc.bracket
    assert b.highest_pass is not None and b.lowest_miss is not None and b.within_tolerance
    assert b.highest_pass <= 5.3 < b.lowest_miss and b.width is not None and b.width <= 0.05
    assert doc.predicted is None and doc.inputs.start == "doubling"
    assert doc.inputs.workload_sha256 and doc.inputs.requests == 20
    assert len(lines) == len(doc.trials) + 2
    assert lines[0].startswith("edge: doubling from 1/s")
    assert lines[4].startswith("trial 4 at 8/s: 3/20 good (need 19) -> MISS; bracket: pass 4/s")
    assert lines[-1].startswith(f"edge: highest pass {b.highest_pass:g}/s, lowest miss")
    assert (tmp_path / "edge" / "edge.json").stat().st_mode & 0o777 == 0o600


def _fleet(folder: Path) -> Path:
    doc = {
        "format": "narwhal.fleet",
        "format_version": 1,
        "profiles": {"path": "profiles/fleet-profiles.json"},
        "engines": [{"iid": "e0", "role": "mixed", "url": "http://127.0.0.1:9100"}],
    }
    path = folder / "fleet.json"
    path.write_text(json.dumps(doc))
    return path


def test_band_start_from_the_profiles(tmp_path: Path) -> None:
    """With --fleet and --profiles the first trial is at the predicted pass_50; the band and the
    files it came from are recorded; an edge 2 % above it is found in two trials."""
    fleet = _fleet(tmp_path)
    store = write_profiles(fleet, [256, 512, 1024, 2048], [512, 1024], concurrency=[1, 4, 16])
    settings = _settings(tmp_path, predict=predict_options(fleet, store))
    band = predicted_band(settings, load_workload(settings.run.workload_path))
    assert band.pass_50 is not None
    start = round_rate(band.pass_50)
    lines: list[str] = []
    code = edge_command(settings, emit=lines.append, run=FakeRun(start * 1.02))
    doc = _doc(tmp_path)
    assert code == 0 and len(doc.trials) == 2
    assert doc.predicted == band and doc.inputs.start == "band"
    assert [t.rate for t in doc.trials] == [start, round_rate(start * 1.05, "down")]
    assert [t.verdict for t in doc.trials] == ["pass", "miss"]
    assert doc.predicted.profiles_sha256 and doc.predicted.fleet == str(fleet)
    assert (
        lines[0].startswith("edge: predicted band pass_90")
        and f"starting at {start:g}/s" in lines[0]
    )


def test_invalid_schedule_repeated_and_kept(tmp_path: Path) -> None:
    """Trial 2's schedule is invalid: edge.json keeps it (verdict invalid) and trial 3 repeats its
    rate (repeat 1); it is never a miss."""
    lines: list[str] = []
    fake = FakeRun(3.0, special={2: {"client_schedule_valid": False, "exit_code": 2}})
    code = edge_command(_settings(tmp_path, tolerance=0.5), emit=lines.append, run=fake)
    doc = _doc(tmp_path)
    assert code == 0
    assert [(t.rate, t.verdict, t.repeat) for t in doc.trials][:3] == [
        (1.0, "pass", 0),
        (2.0, "invalid", 0),
        (2.0, "pass", 1),
    ]
    assert doc.trials[2].run == "trial-03-rate-2"
    assert "INVALID schedule, never read as a miss; repeating 2/s (1 of 2)" in lines[2]


def test_a_rate_that_stays_invalid_exits_1(tmp_path: Path) -> None:
    """Invalid at its first trial and both repeats: exit 1, edge.json says so."""
    bad = {"client_schedule_valid": False, "exit_code": 2}
    fake = FakeRun(3.0, special={1: bad, 2: bad, 3: bad})
    code = edge_command(_settings(tmp_path), emit=lambda _: None, run=fake)
    doc = _doc(tmp_path)
    assert code == 1 == doc.exit_code and doc.stop == "invalid"
    assert [t.verdict for t in doc.trials] == ["invalid"] * 3
    assert doc.message is not None and "client_schedule_valid false" in doc.message


def test_budget_runs_out_exit_2(tmp_path: Path) -> None:
    """No miss within --max-trials: exit 2 and the bracket has no miss."""
    code = edge_command(_settings(tmp_path, max_trials=3), emit=lambda _: None, run=FakeRun(1e9))
    doc = _doc(tmp_path)
    assert code == 2 and doc.stop == "budget" and doc.bracket.lowest_miss is None
    assert [t.rate for t in doc.trials] == [1.0, 2.0, 4.0]


def test_a_trial_that_raises_is_recorded_as_the_end(tmp_path: Path) -> None:
    """run_trial raising a blocking error (its records could not be written): edge.json ends with
    stop error naming the trial, and the error reaches the command line (exit 1)."""
    fake = FakeRun(3.0, special={2: TrialError("cannot write the run records")})
    with pytest.raises(TrialError, match="cannot write the run records"):
        edge_command(_settings(tmp_path), emit=lambda _: None, run=fake)
    doc = _doc(tmp_path)
    assert doc.stop == "error" and doc.exit_code == 1 and len(doc.trials) == 1
    assert doc.message == "trial 2: cannot write the run records"


def test_an_interrupted_trial_ends_the_search_with_130(tmp_path: Path) -> None:
    """A trial that was interrupted (its summary says so) ends the search: exit 130, edge.json
    keeps every trial; Ctrl-C between trials is recorded the same way and raised."""
    fake = FakeRun(3.0, special={2: {"interrupted": True, "exit_code": 130}})
    assert edge_command(_settings(tmp_path), emit=lambda _: None, run=fake) == 130
    doc = _doc(tmp_path)
    assert doc.stop == "interrupted" and doc.exit_code == 130
    assert [t.verdict for t in doc.trials] == ["pass", "interrupted"]
    other = tmp_path / "other"
    other.mkdir()
    with pytest.raises(KeyboardInterrupt):
        edge_command(
            _settings(other), emit=lambda _: None, run=FakeRun(3.0, {2: KeyboardInterrupt()})
        )
    doc = _doc(other)
    assert doc.stop == "interrupted" and doc.exit_code == 130 and len(doc.trials) == 1


_EDGE = ("edge", "--base", "http://127.0.0.1:9", "--workload", "workload.json",
         "--requests", "20", "--ttft", "2", "--tpot", "0.0333", "--attainment", "0.95",
         "--out", "edge")  # fmt: skip


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (("--tolerance", "0"), "--tolerance must be from 0.01 to 1"),
        (("--tolerance", "-0.05"), "got -0.05"),
        (("--max-trials", "1"), "--max-trials must be from 2"),
        (("--max-repeats", "-1"), "--max-repeats must be from 0"),
        (("--start-rate", "0"), "--start-rate must be positive and at most 10000 per second"),
        (("--profiles", "p.json"), "--profiles needs --fleet"),
        (("--fleet", "f.json"), "--fleet needs --profiles"),
        (("--limits", "l.json"), "--limits needs --fleet and --profiles"),
        (("--replications", "100"), "--replications needs --fleet and --profiles"),
        (("--rate", "1"), "No such option: --rate"),
        (("--attainment", "1.5"), "--attainment"),
        (("--max-in-flight", "0"), "--max-in-flight must be from 1"),
    ],
    ids=["tolerance-0", "tolerance-negative", "max-trials-1", "max-repeats", "start-rate-0",
         "profiles-alone", "fleet-alone", "limits-alone", "replications-alone", "rate",
         "attainment", "max-in-flight"],
)  # fmt: skip
def test_bad_input_exits_1_with_one_line_and_writes_nothing(
    tmp_path: Path, extra: tuple[str, ...], needle: str
) -> None:
    """One ``load_trial.py: error:`` line naming the value, exit 1, nothing created."""
    _workload(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    proc = subprocess.run(
        [sys.executable, str(LAUNCHER), *_EDGE, *extra],
        capture_output=True, text=True, timeout=60, check=False, cwd=tmp_path, env=trial_env(),
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.startswith("load_trial.py: error: ") and proc.stderr.count("\n") == 1
    assert needle in proc.stderr, proc.stderr
    assert proc.stdout == "" and "Traceback" not in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_an_out_that_holds_anything_is_refused(tmp_path: Path) -> None:
    """An --out holding a file (an earlier search's edge.json) is exit 1 and left untouched."""
    _workload(tmp_path)
    (tmp_path / "edge").mkdir()
    (tmp_path / "edge" / "edge.json").write_text("{}")
    proc = subprocess.run(
        [sys.executable, str(LAUNCHER), *_EDGE],
        capture_output=True, text=True, timeout=60, check=False, cwd=tmp_path, env=trial_env(),
    )  # fmt: skip
    assert proc.returncode == 1
    assert "refusing --out edge: it already holds edge.json" in proc.stderr
    assert [p.name for p in (tmp_path / "edge").iterdir()] == ["edge.json"]
    assert orjson.loads((tmp_path / "edge" / "edge.json").read_bytes()) == {}


def test_profiles_outside_the_domain_refused_before_anything_is_created(tmp_path: Path) -> None:
    """A store that does not cover the workload: exit 1 naming the engine, no --out created."""
    fleet = _fleet(tmp_path)
    write_profiles(fleet, [256, 512], [512])  # 1,024 input tokens lie beyond both domains
    _workload(tmp_path)
    proc = subprocess.run(
        [sys.executable, str(LAUNCHER), *_EDGE, "--fleet", "fleet.json",
         "--profiles", "profiles/fleet-profiles.json"],
        capture_output=True, text=True, timeout=60, check=False, cwd=tmp_path, env=trial_env(),
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    assert "outside the accepted profile domain" in proc.stderr and "e0" in proc.stderr
    assert not (tmp_path / "edge").exists()


def test_help_names_the_exit_codes_and_every_run_option() -> None:
    """``edge --help`` takes run's options (but --rate) and says what each exit code means."""
    proc = subprocess.run(
        [sys.executable, str(LAUNCHER), "edge", "--help"],
        capture_output=True, text=True, timeout=60, check=False, env=trial_env(),
    )  # fmt: skip
    text = " ".join(proc.stdout.split())
    for flag in ("--base", "--workload", "--requests", "--ttft", "--tpot", "--attainment",
                 "--max-in-flight", "--max-lag", "--request-timeout", "--drain-timeout",
                 "--keepalive-expiry", "--drain-preset", "--drain-gauge", "--transport",
                 "--api-key-env", "--max-model-len", "--launch-record", "--out", "--fleet",
                 "--profiles", "--limits", "--kv-transfer-s-per-token",
                 "--max-num-batched-tokens", "--replications", "--seed", "--start-rate",
                 "--tolerance", "--max-trials", "--max-repeats"):  # fmt: skip
        assert flag in text, flag
    assert "Exit 0 when the bracket" in text and "130 interrupted" in text
