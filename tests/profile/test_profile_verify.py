"""``--verify STORE --out PROBE``: the freshness probe against the session's simulated engines
(the ones ``measured`` profiled), and its refusals before any engine is contacted.

The slowed engine (exit 3) and ``check --probe`` are the acceptance test in
``tests/trial/test_trial_e2e_probe.py``.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from narwhal_store import load_probe, read_store

from ._command import run_profile_command
from ._modes import Measured, run_in_process

pytestmark = pytest.mark.slow


def test_a_probe_right_after_the_profile_finds_no_drift(measured: Measured, tmp_path: Path) -> None:
    """Exit 0; the document holds, per engine, the profile's shortest, middle and longest prefill
    length and one decode input length at concurrency 1 and the mid-concurrency cohort, three
    repeats each against the profile's own samples, every factor near 1, nothing drifted; the
    JSON result carries the same drift figures. The engines run in real time on a machine other
    tests share, so "near 1" is within the generous threshold given here (0.5): a repeat of the
    session's profile once read 1.16 under load; the slowed engine's factor is the acceptance
    test's (on a slowed time scale)."""
    out = tmp_path / "probe.json"
    done = run_profile_command(
        "--fleet", measured.fleet_a, "--verify", measured.store_a, "--out", out, "--format", "json",
        "--threshold", "0.5",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    doc = load_probe(out)
    assert doc.profiles == str(measured.store_a)
    assert doc.profiles_sha256 == hashlib.sha256(measured.store_a.read_bytes()).hexdigest()
    assert doc.fleet_sha256 == hashlib.sha256(measured.fleet_a.read_bytes()).hexdigest()
    assert doc.threshold == 0.5
    assert doc.drifted() == []
    assert list(doc.engines) == ["g0.a", "g0.b"]
    created = read_store(measured.store_a).store.created_at
    for drift in doc.engines.values():
        assert drift.profile_created_at == created
        where = [(p.phase, p.input_len, p.concurrency) for p in drift.points]
        assert where == [
            ("prefill", 2048, 1),
            ("prefill", 8192, 1),
            ("prefill", 16384, 1),
            ("decode", 512, 1),
            ("decode", 512, 8),
        ]
        for point in drift.points:
            assert point.reference == "samples"
            assert len(point.measured_s) == 3
            assert point.factors == pytest.approx([m / point.reference_s for m in point.measured_s])
            assert all(abs(f - 1) < 0.5 for f in point.factors), point
        assert drift.prefill is not None and drift.decode is not None
        assert (drift.prefill.repeats, drift.decode.repeats) == (9, 6)
        for phase in (drift.prefill, drift.decode):
            assert not phase.drifted
            assert phase.low <= phase.factor <= phase.high
            assert abs(phase.factor - 1) < 0.5
        assert drift.seconds > 0
    result = done.result()
    assert (result["ok"], result["mode"], result["path"]) == (True, "verify", str(out))
    assert result["profiles"] == 2 and result["error"] is None
    summary = result["probe"]
    assert summary["drifted"] == [] and summary["threshold"] == 0.5
    for iid, drift in doc.engines.items():
        assert summary["engines"][iid]["decode"] == drift.decode.model_dump()
        assert summary["engines"][iid]["prefill"] == drift.prefill.model_dump()

    text_out = tmp_path / "probe-text.json"
    text = run_in_process(
        "--fleet", measured.fleet_a, "--verify", measured.store_a, "--out", text_out,
        "--only", "g0.b", "--threshold", "0.5",
    )  # fmt: skip
    assert text.returncode == 0, text.stderr
    *lines, last = text.stdout.splitlines()
    assert last == f"wrote the probe of 1 engine(s) to {text_out}"
    figure = r"\d+\.\d\dx \(\d+\.\d\d-\d+\.\d\d\)"
    line = (
        rf"g0\.b: prefill {figure}, decode {figure} against the profile of {re.escape(created)}; "
    )
    assert len(lines) == 1 and re.fullmatch(line + r"\d+\.\d s", lines[0]), text.stdout
    assert list(load_probe(text_out).engines) == ["g0.b"]


@pytest.mark.parametrize(("value", "shown"), [("0", "'0'"), ("1.5", "'1.5'"), ("1", "'1'")])
def test_a_threshold_outside_zero_to_one_is_refused(
    measured: Measured, tmp_path: Path, value: str, shown: str
) -> None:
    """Exit 2 naming the value; nothing written."""
    out = tmp_path / "probe.json"
    args = ["--fleet", measured.fleet_a, "--verify", measured.store_a, "--out", out]
    done = run_in_process(*args, "--threshold", value)
    assert done.returncode == 2
    assert done.stderr == (
        f"narwhal-profile: error: --threshold: {shown} is not between 0 and 1 (a drift of 0.10 "
        "is 10 %; both ends excluded)\n"
    )
    assert not out.exists()


def test_an_existing_out_is_refused_and_left_alone(measured: Measured, tmp_path: Path) -> None:
    """Exit 2 naming the file, whose bytes stay as they were."""
    out = tmp_path / "probe.json"
    out.write_bytes(b"an earlier probe\n")
    done = run_in_process("--fleet", measured.fleet_a, "--verify", measured.store_a, "--out", out)
    assert done.returncode == 2
    assert f"--out {out} already exists" in done.stderr
    assert out.read_bytes() == b"an earlier probe\n"


def test_an_engine_without_a_profile_for_its_key_is_refused(
    measured: Measured, tmp_path: Path
) -> None:
    """Fleet B gives the engines other roles than store A was measured under: exit 2 naming the
    first engine, its key and the store, before any engine is contacted; nothing written."""
    out = tmp_path / "probe.json"
    done = run_in_process("--fleet", measured.fleet_b, "--verify", measured.store_a, "--out", out)
    assert done.returncode == 2
    assert done.stderr.startswith(
        f"narwhal-profile: error: engine g0.a: the store {measured.store_a} holds no profile for "
        "its current key g0.a (group g0, decode=1+prefill=1, target decode)"
    ), done.stderr
    assert not out.exists()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--merge", "a.json", "--merge", "b.json"], "--verify is exclusive with --merge"),
        (["--refit-samples", "x.samples.json"], "--verify is exclusive with --refit-samples"),
        (["--colocated"], "--verify is exclusive with --colocated"),
        (["--overwrite"], "--verify is exclusive with --overwrite"),
        (["--mixing"], "--mixing does not apply to --verify"),
        (["--shard", "1/2"], "--shard does not apply to --verify"),
        (["--parallel-groups", "2"], "--parallel-groups does not apply to --verify"),
        (["--prefill-lens", "256,512,1024"], "--prefill-lens does not apply to --verify"),
        (["--neighbour-prefill-rps", "1"], "--neighbour-prefill-rps does not apply to --verify"),
    ],
)
def test_options_of_other_modes_are_refused(
    measured: Measured, tmp_path: Path, extra: list[str], message: str
) -> None:
    """Exit 2 naming the option; nothing written."""
    out = tmp_path / "probe.json"
    args = ["--fleet", measured.fleet_a, "--verify", measured.store_a, "--out", out, *extra]
    done = run_in_process(*args)
    assert done.returncode == 2
    assert message in done.stderr
    assert not out.exists()


def test_out_is_required_and_threshold_needs_verify(measured: Measured) -> None:
    """--verify without --out, and --threshold without --verify: exit 2, one line each."""
    alone = run_in_process("--fleet", measured.fleet_a, "--verify", measured.store_a)
    assert alone.returncode == 2
    assert "--verify requires --out PATH" in alone.stderr
    stray = run_in_process("--fleet", measured.fleet_a, "--threshold", "0.2")
    assert stray.returncode == 2
    assert "--threshold applies only to --verify" in stray.stderr
