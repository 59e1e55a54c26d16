"""``run``'s server view against the simulated fleet: ``/metrics`` around the run, the comparison
with the client's records, pages that cannot be read, and the options' bad values."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from narwhal_sim.testing import SimFleet, free_port
from narwhal_trial import Summary
from narwhal_trial.documents._server import ServerDoc

from .conftest import Cli, read_run, run_args, wait_for

pytestmark = pytest.mark.slow


def _server(out: Path) -> ServerDoc:
    return ServerDoc.model_validate(orjson.loads((out / "server.json").read_bytes()))


def test_fleet_pages_are_read_and_compared(
    cli: Cli, shared_fleet: SimFleet, tiny_workload: Path, tmp_path: Path
) -> None:
    """With --fleet: each engine's and the router's page in server.json; the engines' finished
    count equals the client's completed count, and the TTFT gap is graded."""
    out = tmp_path / "run"
    args = run_args(str(shared_fleet.router_url), tiny_workload, out, requests=12, attainment=0.5)
    proc = cli(*args, "--fleet", str(shared_fleet.fleet_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    _, records, raw = read_run(out)
    summary = Summary.model_validate(raw)
    doc = _server(out)
    assert [(p.name, p.kind) for p in doc.pages] == [("e0", "engine"), ("router", "router")]
    engine = doc.pages[0]
    assert engine.before.ok and engine.after.ok and engine.restarted is False
    ttft = engine.histograms["vllm:time_to_first_token_seconds"]
    assert ttft.count == 12 and sum(ttft.counts) == 12  # the warm-up is before the first reading
    assert summary.server is not None
    fleet = summary.server.fleet
    completed = sum(r["status"] == "completed" for r in records)
    assert fleet.client_completed == completed == fleet.server_completed == 12
    assert fleet.ttft is not None and fleet.ttft_method == "engines"
    # the client's TTFT holds the engine's plus what lies outside it (router, network, client)
    assert fleet.ttft.added_mean_s == pytest.approx(
        fleet.ttft.client_mean_s - ttft.sum / ttft.count
    )
    assert fleet.ttft.added_mean_s > 0
    assert summary.server.engines[0].completed == 12 and summary.server.engines[0].share == 1.0
    assert summary.server.warnings == []
    assert "server: 2 page(s) read; engines finished 12 (client completed 12)" in proc.stdout
    assert "client-added" in proc.stdout and fleet.ttft.grade in proc.stdout


def test_unreadable_engine_page_is_recorded_not_fatal(
    cli: Cli, shared_fleet: SimFleet, tiny_workload: Path, tmp_path: Path
) -> None:
    """An engine URL nothing answers at: recorded as missing with the reason, a warning on
    screen, and the run's verdict stands (exit 0)."""
    out = tmp_path / "run"
    dead = f"http://127.0.0.1:{free_port()}"
    args = run_args(str(shared_fleet.router_url), tiny_workload, out, requests=6, attainment=0.5)
    proc = cli(*args, "--engine-metrics", dead)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = _server(out)
    missing = next(p for p in doc.pages if p.url.startswith(dead))
    assert not missing.before.ok and missing.before.error and missing.histograms == {}
    summary = Summary.model_validate(read_run(out)[2])
    assert summary.server is not None
    assert summary.server.missing_pages == [missing.name]
    assert summary.server.fleet.server_completed is None
    assert any("/metrics not read before the run" in w for w in summary.server.warnings)
    assert "warning:" in proc.stdout


def test_lone_engine_base_is_read_as_an_engine(
    cli: Cli, shared_fleet: SimFleet, tiny_workload: Path, tmp_path: Path
) -> None:
    """A run straight against one engine, no fleet: its page is the engine ``base``."""
    out = tmp_path / "run"
    args = run_args(shared_fleet.urls["e0"], tiny_workload, out, requests=6, attainment=0.5)
    proc = cli(*args, "--drain-preset", "vllm")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = Summary.model_validate(read_run(out)[2])
    assert summary.server is not None
    assert [(e.name, e.completed) for e in summary.server.engines] == [("base", 6)]
    assert summary.server.fleet.server_completed == 6


def test_no_server_metrics_writes_no_server_view(
    cli: Cli, shared_fleet: SimFleet, tiny_workload: Path, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    args = run_args(str(shared_fleet.router_url), tiny_workload, out, requests=4, attainment=0.5)
    proc = cli(*args, "--no-server-metrics")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not (out / "server.json").exists()
    assert read_run(out)[2]["server"] is None
    assert "server:" not in proc.stdout


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (("--otlp-receiver", "nonsense"), "--otlp-receiver must be HOST:PORT"),
        (("--otlp-receiver", "127.0.0.1:99999"), "--otlp-receiver must be HOST:PORT"),
        (("--engine-metrics", "ftp://127.0.0.1:1"), "--engine-metrics must be an http://"),
        (("--otlp-wait", "-1"), "--otlp-wait must be 0 to 600 seconds"),
        (("--fleet", "MISSING"), "--fleet"),
        (("--otlp-receiver", "127.0.0.1:1", "--no-server-metrics"), "drop --no-server-metrics"),
    ],
)
def test_bad_server_options_refused_before_anything_is_written(
    cli: Cli, tiny_workload: Path, tmp_path: Path, extra: tuple[str, ...], message: str
) -> None:
    out = tmp_path / "run"
    extra = tuple(str(tmp_path / "missing.json") if x == "MISSING" else x for x in extra)
    proc = cli(*run_args("http://127.0.0.1:9", tiny_workload, out), *extra)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert message in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not out.exists()


def test_receiver_port_in_use_refused_before_anything_is_written(
    cli: Cli, tiny_workload: Path, tmp_path: Path
) -> None:
    import socket

    out = tmp_path / "run"
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = cli(*run_args("http://127.0.0.1:9", tiny_workload, out),
                   "--otlp-receiver", f"127.0.0.1:{port}")  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"--otlp-receiver 127.0.0.1:{port}: cannot listen there" in proc.stderr
    assert not out.exists()


def test_server_view_that_cannot_be_written_is_a_blocking_error_with_a_summary(
    start_cli: Callable[..., subprocess.Popen[str]],
    shared_fleet: SimFleet,
    tiny_workload: Path,
    tmp_path: Path,
) -> None:
    """``server.json`` turned into a symlink while the run offers (atomic writes refuse to follow
    it): exit 1, summary.json still written and naming the failure, the records kept, nothing
    written through the link."""
    out = tmp_path / "run"
    target = tmp_path / "elsewhere.json"
    proc = start_cli(*run_args(str(shared_fleet.router_url), tiny_workload, out, requests=10,
                               rate=4, attainment=0.5))  # fmt: skip
    wait_for(lambda: (out / "manifest.json").exists(), what="the run to start")
    (out / "server.json").symlink_to(target)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 1, stdout + stderr
    summary = orjson.loads((out / "summary.json").read_bytes())
    assert summary["exit_code"] == 1 and "cannot write the server view" in summary["error"]
    assert summary["server"] is None
    assert len((out / "requests.jsonl").read_bytes().splitlines()) == 10
    assert not target.exists()
