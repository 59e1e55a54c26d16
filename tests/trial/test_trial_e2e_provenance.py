"""End to end against the simulated router: what a run keeps for provenance (the packages it ran,
the launch records), and ``reconcile`` refusing a router that was not reserved for the trial."""

from __future__ import annotations

import hashlib
import stat
import subprocess
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

import httpx
import orjson
import pytest

from narwhal_sim.testing import SimFleet
from narwhal_trial import Manifest
from narwhal_trial._provenance import helper_digest, helper_files

from .conftest import LAUNCHER, Cli, journal_ids, read_run, run_args, wait_for

pytestmark = pytest.mark.slow

OFF = "vllm serve sim/tiny --max-model-len 32768 --no-enable-prefix-caching\n"


def _foreign_completion(fleet: SimFleet, request_id: str) -> None:
    """One short streamed completion through the router that is not the trial's."""
    body = {"model": "sim/tiny", "prompt": [1, 2, 3], "max_tokens": 4, "stream": True}
    with (
        httpx.Client(base_url=str(fleet.router_url)) as http,
        http.stream("POST", "/v1/completions", json=body, headers={"X-Request-Id": request_id},
                    timeout=60) as response,
    ):  # fmt: skip
        assert response.status_code == 200
        for _ in response.iter_bytes():
            pass


def test_run_keeps_its_launch_records_and_the_packages_it_ran(
    cli: Cli, shared_fleet: SimFleet, tiny_workload: Path, tmp_path: Path
) -> None:
    """Two launch records of the same name from two folders: both copied (0600, distinct names,
    exact bytes) into launch-records/ (0700), each with its SHA-256 and source in the manifest;
    the manifest lists the narwhal packages the digest covers, at their installed versions."""
    records = []
    for host in ("a", "b"):
        (tmp_path / host).mkdir()
        record = tmp_path / host / "launch.txt"
        record.write_text(OFF.replace("32768", "32768 --port 800" + str(len(records))))
        records.append(record)
    out = tmp_path / "run"
    proc = cli(*run_args(str(shared_fleet.router_url), tiny_workload, out, requests=2,
                         attainment=0.5), "--launch-record", str(records[0]),
               "--launch-record", str(records[1]))  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    manifest = Manifest.model_validate(read_run(out)[0])
    copies = [(c.file, c.source, c.sha256) for c in manifest.launch_records]
    digests = [hashlib.sha256(r.read_bytes()).hexdigest() for r in records]
    assert copies == [
        ("launch-records/launch.txt", str(records[0]), digests[0]),
        ("launch-records/launch-2.txt", str(records[1]), digests[1]),
    ]
    assert stat.S_IMODE((out / "launch-records").stat().st_mode) == 0o700
    for copy, source in zip(manifest.launch_records, records, strict=True):
        kept = out / copy.file
        assert kept.read_bytes() == source.read_bytes()
        assert stat.S_IMODE(kept.lstat().st_mode) == 0o600 and kept.is_file()
    assert manifest.arguments["launch_records"] == [str(r) for r in records]
    assert manifest.packages == {
        d: metadata.version(d)
        for d in ("narwhal-engine-client", "narwhal-fit", "narwhal-store", "narwhal-trial")
    }
    modules = {key.split("/", 1)[0] for key in manifest.helper_files}
    assert modules == {
        "narwhal_engine_client",
        "narwhal_fit",
        "narwhal_store",
        "narwhal_trial",
        "launcher",
    }
    assert manifest.helper_digest == helper_digest(helper_files(LAUNCHER))


@pytest.mark.parametrize(
    ("name", "text", "needle"),
    [
        ("missing.txt", None, "cannot read launch record {path}: No such file or directory"),
        ("caching-on.txt", "vllm serve sim/tiny --port 8000\n",
         "--launch-record {path}: no --no-enable-prefix-caching in the command line"),
    ],
    ids=["missing", "caching-on"],
)  # fmt: skip
def test_bad_launch_record_is_refused_before_anything(
    cli: Cli,
    shared_fleet: SimFleet,
    tiny_workload: Path,
    tmp_path: Path,
    name: str,
    text: str | None,
    needle: str,
) -> None:
    """A launch record that cannot be read, or that shows prefix caching on: exit 1 with one line
    naming it, before anything is written (no --out) or sent (no journal entry)."""
    record = tmp_path / name
    if text is not None:
        record.write_text(text)
    sent = len(journal_ids(shared_fleet))
    out = tmp_path / "run"
    proc = cli(*run_args(str(shared_fleet.router_url), tiny_workload, out, requests=2),
               "--launch-record", str(record))  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stderr.count("\n") == 1 and proc.stdout == ""
    assert proc.stderr.startswith("load_trial.py: error: ")
    assert needle.format(path=record) in proc.stderr
    assert not out.exists()
    assert len(journal_ids(shared_fleet)) == sent


def test_reconcile_refuses_a_foreign_request_inside_the_window(
    cli: Cli,
    start_cli: Callable[..., subprocess.Popen[str]],
    shared_fleet: SimFleet,
    tiny_workload: Path,
    tmp_path: Path,
) -> None:
    """A request that is not the trial's, sent through the router while the offers go out: the
    run itself is unchanged, but reconcile exits 1 naming one foreign entry inside the window
    (the router was not reserved); the report is still printed. Foreign requests before the run
    and after it are counted, not judged."""
    assert shared_fleet.journal_path is not None
    _foreign_completion(shared_fleet, "operator-probe-before")
    out = tmp_path / "run"
    proc = start_cli(*run_args(str(shared_fleet.router_url), tiny_workload, out, rate=20,
                               requests=40, attainment=0.05))  # fmt: skip
    lines = out / "requests.jsonl"
    wait_for(lambda: lines.exists() and lines.read_bytes().count(b"\n") >= 3, what="3 records")
    _foreign_completion(shared_fleet, "operator-probe-during")
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stdout + stderr
    _, records, _ = read_run(out)
    sent = {r["request_id"] for r in records if r["sent"]}
    wait_for(lambda: sent <= set(journal_ids(shared_fleet)), what="the run's journal entries")
    _foreign_completion(shared_fleet, "operator-probe-after")
    args = ("reconcile", "--requests", str(lines), "--journal", str(shared_fleet.journal_path))
    rec = cli(*args)
    assert rec.returncode == 1, rec.stdout + rec.stderr
    assert rec.stderr.count("\n") == 1 and rec.stderr.startswith("load_trial.py: error: 1 ")
    assert "foreign journal entry (not of run trial-" in rec.stderr
    assert "(operator-probe-during): the router was not reserved for the trial" in rec.stderr
    assert "1 foreign inside the trial's window" in rec.stdout and "\nreconciled" in rec.stdout
    report = orjson.loads(cli(*args, "--json").stdout)
    assert report["ok"] is True and report["reserved"] is False
    assert [e["request_id"] for e in report["foreign_in_window"]] == ["operator-probe-during"]
    assert report["foreign_entries"] >= 3
    window = report["window"]
    entry = report["foreign_in_window"][0]
    assert window["start"] <= entry["arrival"] <= entry["end"] <= window["end"]
