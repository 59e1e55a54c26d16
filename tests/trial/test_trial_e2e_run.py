"""End-to-end runs of the runbook's ``run`` command against the simulated router (loopback)."""

from __future__ import annotations

import hashlib
import signal
import socket
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from narwhal_sim.testing import SimFleet
from narwhal_trial import Manifest, RequestRecord, Summary
from narwhal_trial._provenance import helper_digest, helper_files

from .conftest import LAUNCHER, Cli, journal_ids, read_run, run_args, wait_for

pytestmark = pytest.mark.slow


def test_passing_rate_exits_0_with_complete_records(
    cli: Cli, shared_fleet: SimFleet, tiny_workload: Path, tmp_path: Path
) -> None:
    """A rate the fleet meets: exit 0, every offer sent once, records valid and reconciled."""
    out = tmp_path / "rate-20"
    # 9 of 12 needed: a load spike on a shared machine must not turn this functional test red
    proc = cli(*run_args(str(shared_fleet.router_url), tiny_workload, out, requests=12,
                         attainment=0.75))  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "PASS" in proc.stdout
    manifest, records, summary = read_run(out)
    Manifest.model_validate(manifest)
    Summary.model_validate(summary)
    assert [r["sequence"] for r in sorted(records, key=lambda r: r["sequence"])] == list(range(12))
    for record in records:
        RequestRecord.model_validate(record)
        assert record["status"] == "completed"
        assert record["completion_tokens"] == 32 and record["prompt_tokens"] == 1024
        assert 0 <= record["lag_s"] < 0.251  # never sent later than --max-lag
    assert summary["pass"] and summary["client_schedule_valid"] and summary["exit_code"] == 0
    assert (summary["requests"], summary["required_good"]) == (12, 9)
    assert summary["good"] == sum(r["good"] for r in records) >= 9
    assert summary["warmup_status"] == "completed" and len(summary["drain_s"]) == 2
    assert summary["client"]["cpu_user_s"] > 0 and summary["client"]["peak_rss_bytes"] > 0
    assert summary["client"]["event_loop_lag_s"]["count"] > 0
    # the manifest holds every item the runbook lists
    for key in (
        "workload_digest",
        "helper_digest",
        "hostname",
        "source_revision",
        "command",
        "python_version",
        "httpx_version",
        "limits",
        "run_id",
        "base_url",
        "start_time",
    ):
        assert manifest[key], key  # fmt: skip
    assert manifest["limits"]["max_in_flight"] == 64 and manifest["limits"]["max_lag_s"] == 0.25
    assert isinstance(manifest["server_version"], str) and manifest["server_version"]  # /version
    assert manifest["limits"]["stream_transport"] == "raw"  # --transport auto, http:// base
    # connections opened ahead: rate x warm-up duration x 1.25 + 1, so at least 2 at 20 req/s
    assert 2 <= summary["client"]["preconnected"] <= 64
    assert manifest["arguments"]["transport"] == "auto"
    assert "launcher/load_trial.py" in manifest["helper_files"]
    assert manifest["helper_digest"] == helper_digest(helper_files(LAUNCHER))
    # the digest covers the engine client and the store too, each listed with its version
    assert set(manifest["packages"]) == {
        "narwhal-engine-client",
        "narwhal-fit",
        "narwhal-store",
        "narwhal-trial",
    }
    assert any(key.startswith("narwhal_engine_client/") for key in manifest["helper_files"])
    assert manifest["workload_digest"] == hashlib.sha256(tiny_workload.read_bytes()).hexdigest()
    assert manifest["command"][1:3] == [str(LAUNCHER), "run"]
    assert stat.S_IMODE(out.stat().st_mode) == 0o700
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in out.iterdir())
    # a vLLM-compatible server takes every field: one accepted probe, nothing omitted
    fields = manifest["request_fields"]
    assert (fields["omitted"], fields["token_counting"]) == ([], "token_ids")
    assert [(p["outcome"], p["http_status"]) for p in fields["probes"]] == [("accepted", 200)]
    assert manifest["frontend_scheduler"] is None  # our router publishes no dynamo_frontend_*
    # every sent request reached the router exactly once, plus the warm-up and the probe
    ids = journal_ids(shared_fleet)
    assert sorted(i for i in ids if i.startswith(manifest["run_id"])) == sorted(
        [r["request_id"] for r in records]
        + [manifest["warmup_request_id"]]
        + [p["request_id"] for p in manifest["request_fields"]["probes"]]
    )
    assert shared_fleet.journal_path is not None
    rec = cli("reconcile", "--requests", str(out / "requests.jsonl"),
              "--journal", str(shared_fleet.journal_path))  # fmt: skip
    assert rec.returncode == 0, rec.stdout + rec.stderr
    assert "reconciled" in rec.stdout


def test_out_that_holds_a_run_is_refused_unchanged(
    cli: Cli, shared_fleet: SimFleet, tiny_workload: Path, tmp_path: Path
) -> None:
    """Reusing --out is a blocking error (exit 1: its summary is not this run's), unchanged."""
    out = tmp_path / "rate-20"
    assert (
        cli(*run_args(str(shared_fleet.router_url), tiny_workload, out, requests=2)).returncode == 0
    )
    before = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in out.iterdir()}
    proc = cli(*run_args(str(shared_fleet.router_url), tiny_workload, out, requests=2))
    assert proc.returncode == 1
    assert "refusing --out" in proc.stderr and "already holds" in proc.stderr
    assert {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in out.iterdir()} == before


def test_missing_drain_gauges_are_a_blocking_error(
    cli: Cli, shared_fleet: SimFleet, tiny_workload: Path, tmp_path: Path
) -> None:
    """No configured gauge on the metrics page: exit 1, nothing offered, summary says why."""
    out = tmp_path / "nodrain"
    proc = cli(*run_args(str(shared_fleet.router_url), tiny_workload, out,
                         drain_gauge="narwhal_no_such_gauge"))  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    _, records, summary = read_run(out)
    assert records == [] and summary["exit_code"] == 1 and summary["offered"] == 0
    assert "none of the drain gauges" in summary["error"]
    assert "narwhal_no_such_gauge" in proc.stderr


def test_fleet_that_does_not_drain_is_a_blocking_error(
    cli: Cli, fresh_fleet: SimFleet, tiny_workload: Path, tmp_path: Path
) -> None:
    """Resident work that never finishes: the drain times out, exit 1, nothing offered."""
    fresh_fleet.set_faults("e0", stall=True)
    body = {"model": "sim/tiny", "prompt": [1, 2, 3], "max_tokens": 4, "stream": True}
    out = tmp_path / "busy"
    base = str(fresh_fleet.router_url)
    with (
        httpx.Client(base_url=base) as http,
        http.stream("POST", "/v1/completions", json=body, timeout=60) as response,
    ):
        assert response.status_code == 200
        proc = cli(*run_args(base, tiny_workload, out, drain_timeout=0.5))
        fresh_fleet.set_faults("e0", stall=None)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    _, records, summary = read_run(out)
    assert records == [] and summary["offered"] == 0
    assert "did not drain" in summary["error"]


def test_sigint_mid_run_exits_130_with_valid_partial_records(
    start_cli: Callable[..., subprocess.Popen[str]],
    shared_fleet: SimFleet,
    tiny_workload: Path,
    tmp_path: Path,
) -> None:
    """Ctrl-C stops offering, closes in-flight offers as interrupted, keeps valid artefacts."""
    out = tmp_path / "interrupted"
    proc = start_cli(*run_args(str(shared_fleet.router_url), tiny_workload, out, requests=400))
    lines = out / "requests.jsonl"
    wait_for(lambda: lines.exists() and lines.read_bytes().count(b"\n") >= 3, what="3 records")
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stdout + stderr
    _, records, summary = read_run(out)
    valid = Summary.model_validate(summary)
    for record in records:
        RequestRecord.model_validate(record)
    assert valid.interrupted and valid.exit_code == 130 and not valid.passed
    assert 3 <= valid.offered == len(records) < 400
    assert valid.requests == 400 and valid.attainment == valid.good / 400
    statuses: dict[str, Any] = summary["counts"]
    assert statuses["completed"] + statuses["interrupted"] == len(records)


def test_unreachable_base_is_a_blocking_error(
    cli: Cli, tiny_workload: Path, tmp_path: Path
) -> None:
    """Nothing listening at --base: exit 1, the manifest and a summary naming the cause."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again before the run starts
    out = tmp_path / "down"
    proc = cli(*run_args(f"http://127.0.0.1:{port}", tiny_workload, out))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    manifest, records, summary = read_run(out)
    assert manifest["base_url"] == f"http://127.0.0.1:{port}"
    assert records == [] and summary["exit_code"] == 1
    assert "cannot list served models" in summary["error"]


def test_httpx_transport_runs_the_same_trial(
    cli: Cli, shared_fleet: SimFleet, tiny_workload: Path, tmp_path: Path
) -> None:
    """--transport httpx: same records and verdict through the router, and the manifest says so."""
    out = tmp_path / "rate-20-httpx"
    proc = cli(*run_args(str(shared_fleet.router_url), tiny_workload, out, requests=12,
                         attainment=0.75, transport="httpx"))  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    manifest, records, summary = read_run(out)
    assert manifest["limits"]["stream_transport"] == "httpx"
    assert manifest["arguments"]["transport"] == "httpx"
    assert summary["client"]["preconnected"] == 0  # httpx keeps no pool to fill ahead
    assert sorted(r["sequence"] for r in records) == list(range(12))
    for record in records:
        RequestRecord.model_validate(record)
        assert record["status"] == "completed"
        assert record["completion_tokens"] == 32 and record["prompt_tokens"] == 1024
    assert summary["pass"] and summary["client_schedule_valid"]
    ids = journal_ids(shared_fleet)
    assert sorted(i for i in ids if i.startswith(manifest["run_id"])) == sorted(
        [r["request_id"] for r in records]
        + [manifest["warmup_request_id"]]
        + [p["request_id"] for p in manifest["request_fields"]["probes"]]
    )
