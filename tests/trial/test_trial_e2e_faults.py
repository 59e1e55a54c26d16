"""End-to-end runs against a misbehaving or slow simulated fleet: every offer stays counted."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from narwhal_sim.testing import SimFleet, start_sim_fleet

from .conftest import Cli, journal_ids, read_run, run_args, wait_for

pytestmark = pytest.mark.slow

SCALE = 10.0


def _after_warmup(fleet: SimFleet, out: Path) -> None:
    """Wait until the run's warm-up request has ended at the router (its journal line exists)."""
    manifest = out / "manifest.json"
    wait_for(manifest.exists, what="the manifest")
    warmup = read_manifest_warmup(manifest)
    wait_for(lambda: warmup in journal_ids(fleet), what="the warm-up journal entry")


def read_manifest_warmup(path: Path) -> str:
    """The warm-up request id recorded in a manifest."""
    return str(orjson.loads(path.read_bytes())["warmup_request_id"])


def test_stalled_fleet_forces_schedule_misses_that_are_never_sent(
    cli: Cli,
    start_cli: Callable[..., subprocess.Popen[str]],
    fresh_fleet: SimFleet,
    tiny_workload: Path,
    tmp_path: Path,
) -> None:
    """In flight over the cap: misses recorded, not sent (journal), schedule invalid, exit 2."""
    out = tmp_path / "stalled"
    base = str(fresh_fleet.router_url)
    proc = start_cli(*run_args(base, tiny_workload, out, rate=20, requests=40,
                               max_in_flight=3, request_timeout=2))  # fmt: skip
    _after_warmup(fresh_fleet, out)
    fresh_fleet.set_faults("e0", stall=True)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 2, stdout + stderr
    _, records, summary = read_run(out)
    assert summary["client_schedule_valid"] is False and summary["exit_code"] == 2
    assert summary["requests"] == 40 == len(records) == summary["offered"]
    misses = [r for r in records if r["status"] == "client_schedule_miss"]
    assert misses and summary["schedule_misses"]["in_flight_cap"] == len(misses)
    assert all(not r["sent"] and r["in_flight"] >= 3 for r in misses)
    assert summary["max_in_flight"] == 3
    timeouts = [r for r in records if r["status"] == "timeout"]
    assert timeouts and all(not r["good"] for r in timeouts)
    assert summary["counts"]["timeout"] == len(timeouts)
    # let the stalled requests end, then check the router never saw a missed offer
    fresh_fleet.set_faults("e0", stall=None)
    sent = {r["request_id"] for r in records if r["sent"]}
    wait_for(lambda: sent <= set(journal_ids(fresh_fleet)), what="journal entries of sent offers")
    arrived = set(journal_ids(fresh_fleet))
    assert not {r["request_id"] for r in misses} & arrived
    assert fresh_fleet.journal_path is not None
    rec = cli("reconcile", "--requests", str(out / "requests.jsonl"),
              "--journal", str(fresh_fleet.journal_path))  # fmt: skip
    assert rec.returncode == 0, rec.stdout + rec.stderr


def _run_with_faults(
    start_cli: Callable[..., subprocess.Popen[str]],
    fleet: SimFleet,
    workload: Path,
    out: Path,
    requests: int,
    **faults: Any,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """A run whose engine gets ``faults`` once the warm-up has ended; it must exit 2 (attainment
    missed). Returns its records and summary."""
    proc = start_cli(*run_args(str(fleet.router_url), workload, out, requests=requests))
    _after_warmup(fleet, out)
    fleet.set_faults("e0", **faults)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 2, stdout + stderr
    _, records, summary = read_run(out)
    return records, summary


def test_http_errors_and_cut_streams_count_as_failures(
    start_cli: Callable[..., subprocess.Popen[str]],
    fresh_fleet: SimFleet,
    tiny_workload: Path,
    tmp_path: Path,
) -> None:
    """Refusals and cut streams stay in the denominator: attainment missed, schedule valid."""
    records, summary = _run_with_faults(
        start_cli, fresh_fleet, tiny_workload, tmp_path / "faulty", 20,
        http_error={"status": 503, "rate": 0.5}, cut_after_tokens=5,
    )  # fmt: skip
    counts = summary["counts"]
    assert summary["client_schedule_valid"] is True and summary["pass"] is False
    assert summary["requests"] == 20 == len(records)
    assert counts["http_error"] > 0 and counts["stream_cut"] > 0
    assert counts["http_error"] + counts["stream_cut"] + counts["completed"] == 20
    assert summary["good"] == counts["completed"] < summary["required_good"]
    refused = [r for r in records if r["status"] == "http_error"]
    assert all(r["http_status"] == 503 and "503" in r["error"] for r in refused)
    cut = [r for r in records if r["status"] == "stream_cut"]
    assert all(r["sent"] and not r["good"] for r in cut)
    # a cut stream keeps the tokens it did get, counted from its chunks
    assert all(r["completion_tokens"] == 5 for r in cut), cut


def test_chunks_disagreeing_with_usage_are_protocol_errors(
    start_cli: Callable[..., subprocess.Popen[str]],
    fresh_fleet: SimFleet,
    tiny_workload: Path,
    tmp_path: Path,
) -> None:
    """A usage count the chunks do not add up to is a protocol_error, never a measurement."""
    records, summary = _run_with_faults(
        start_cli, fresh_fleet, tiny_workload, tmp_path / "lying-usage", 6, usage_excess_tokens=3
    )
    assert summary["counts"]["protocol_error"] + summary["counts"]["completed"] == 6
    errors = [r for r in records if r["status"] == "protocol_error"]
    assert errors and all(not r["good"] for r in errors)
    assert all("but usage.completion_tokens is" in r["error"] for r in errors)


@pytest.fixture
def overloaded(tmp_path: Path) -> Iterator[SimFleet]:
    """One engine with the overloaded preset, ten times faster than real time."""
    with start_sim_fleet(tmp_path / "fleet", [{"iid": "e0", "role": "mixed"}], router=True,
                         time_scale=SCALE, preset="overloaded") as fleet:  # fmt: skip
        yield fleet


def test_overloaded_fleet_misses_attainment_with_a_valid_schedule(
    cli: Cli, overloaded: SimFleet, tmp_path: Path
) -> None:
    """The runbook's shape at 1 request/s (time-scaled): exit 2 with client_schedule_valid true,
    a judged run: summary.json written, a MISS verdict, no error line."""
    base = str(overloaded.router_url)
    prep = cli("prepare", "--base", base, "--input-tokens", "8192", "--output-tokens", "128",
               "--seed", "1729", "--out", str(tmp_path / "workload"))  # fmt: skip
    assert prep.returncode == 0, prep.stderr
    out = tmp_path / "rate-1"
    proc = cli(*run_args(base, tmp_path / "workload" / "workload.json", out, rate=1 * SCALE,
                         requests=20, ttft=2 / SCALE, tpot=0.0333 / SCALE))  # fmt: skip
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert (out / "summary.json").is_file() and "-> MISS" in proc.stdout and proc.stderr == ""
    _, records, summary = read_run(out)
    assert summary["client_schedule_valid"] is True
    assert summary["pass"] is False and summary["good"] < summary["required_good"] == 19
    assert summary["counts"]["completed"] == 20 == len(records)
    assert all(r["prompt_tokens"] == 8192 and r["completion_tokens"] == 128 for r in records)


def test_run_checks_the_live_context_limit_from_tokenize(
    cli: Cli, fresh_fleet: SimFleet, tiny_workload: Path, tmp_path: Path
) -> None:
    """/v1/models without max_model_len skips nothing: /tokenize's limit refuses (exit 1)."""
    fresh_fleet.set_faults("e0", models_max_model_len="missing", tokenize_max_model_len=1000)
    out = tmp_path / "too-long"
    proc = cli(*run_args(str(fresh_fleet.router_url), tiny_workload, out, requests=2))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    records = (out / "requests.jsonl").read_bytes()
    summary = orjson.loads((out / "summary.json").read_bytes())
    assert records == b"" and summary["exit_code"] == 1 and summary["warmup_status"] is None
    assert "exceed the live max_model_len 1000" in summary["error"]
