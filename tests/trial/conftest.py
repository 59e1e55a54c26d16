"""Fixtures of the narwhal-trial tests: the command as a subprocess, simulated fleets, workloads."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import orjson
import pytest

from narwhal_sim.testing import SimFleet, start_sim_fleet

REPO = Path(__file__).resolve().parents[2]
LAUNCHER = REPO / "tools" / "measurement" / "load_trial.py"
NO_JITTER = {
    "format": "narwhal.sim",
    "format_version": 1,
    "defaults": {"jitter": 0.0},
    "engines": {},
}

Cli = Callable[..., subprocess.CompletedProcess[str]]


def _cmd(args: tuple[str, ...]) -> list[str]:
    return [sys.executable, str(LAUNCHER), *args]


def trial_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This environment without the default key variable (an operator's key never leaks into a
    test), plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if k != "NARWHAL_API_KEY"}
    return env | dict(extra or {})


@pytest.fixture
def cli() -> Cli:
    """Run ``load_trial.py ARGS`` as the runbook does; returns the completed process (text).
    ``env=`` adds variables (API keys) to the command's environment."""

    def run(
        *args: str, timeout: float = 120.0, env: Mapping[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            _cmd(args),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            cwd=REPO,
            env=trial_env(env),
        )

    return run


@pytest.fixture
def start_cli() -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """Start ``load_trial.py ARGS`` in the background; every process is reaped after the test."""
    started: list[subprocess.Popen[str]] = []

    def start(*args: str) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            _cmd(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO
        )
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=30)


def tiny_fleet(workdir: Path, **kw: Any) -> SimFleet:
    """One tiny-preset engine ``e0`` behind the router, no jitter. ``engine=`` adds fleet-entry
    keys (``api_key_env``); other keywords go to ``start_sim_fleet`` (``router_options``...)."""
    return start_sim_fleet(
        workdir,
        [{"iid": "e0", "role": "mixed", **kw.pop("engine", {})}],
        sim_config=kw.pop("sim_config", NO_JITTER),
        router=True,
        preset=kw.pop("preset", "tiny"),
        **kw,
    )


@pytest.fixture(scope="module")
def shared_fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimFleet]:
    """A tiny-preset fleet shared by the tests of one module that inject no faults."""
    with tiny_fleet(tmp_path_factory.mktemp("fleet")) as fleet:
        yield fleet


@pytest.fixture
def fresh_fleet(tmp_path: Path) -> Iterator[SimFleet]:
    """A tiny-preset fleet of this test alone (for fault injection)."""
    with tiny_fleet(tmp_path / "fleet") as fleet:
        yield fleet


def prepare_workload(
    base: str, folder: Path, *extra: str, env: Mapping[str, str] | None = None
) -> Path:
    """``prepare`` a 1024-in / 32-out workload (seed 1729) into ``folder/workload``; its path."""
    out = folder / "workload"
    proc = subprocess.run(
        _cmd(("prepare", "--base", base, "--input-tokens", "1024", "--output-tokens", "32",
              "--seed", "1729", "--out", str(out), *extra)),
        capture_output=True, text=True, timeout=120, check=False, cwd=REPO, env=trial_env(env),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return out / "workload.json"


@pytest.fixture(scope="module")
def tiny_workload(shared_fleet: SimFleet, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 1024-in / 32-out workload prepared against the tiny fleet (model sim/tiny)."""
    return prepare_workload(str(shared_fleet.router_url), tmp_path_factory.mktemp("trial"))


class JsonHandler(BaseHTTPRequestHandler):
    """A quiet handler of a stand-in server with a JSON answer helper."""

    def log_message(self, *args: Any) -> None:
        """Quiet."""

    def send_json(self, doc: Any, status: int = 200) -> None:
        """Answer ``doc`` as JSON with ``status``."""
        data = orjson.dumps(doc)
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@contextlib.contextmanager
def serve(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """Serve ``handler`` on a free loopback port from a thread; yields the base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def run_args(base: str, workload: Path, out: Path, **flags: Any) -> list[str]:
    """The runbook's ``run`` arguments with SLO defaults, plus extra ``--flag value`` pairs."""
    values = {"rate": 20, "requests": 10, "ttft": 2, "tpot": 0.0333, "attainment": 0.95}
    # A wider lag limit than the runbook's 50 ms keeps these functional tests independent of the
    # load on a shared machine; the lag limit itself is tested with an injected clock, and the
    # client's real scheduling accuracy is measured by bench/trial_fidelity.py.
    values = values | {"max_lag": 0.25} | flags
    args = ["run", "--base", base, "--workload", str(workload), "--out", str(out)]
    for key, value in values.items():
        args += [f"--{key.replace('_', '-')}", str(value)]
    return args


def read_run(out: Path) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any]]:
    """manifest, request records and summary of a run folder."""
    manifest = orjson.loads((out / "manifest.json").read_bytes())
    lines = (out / "requests.jsonl").read_bytes().splitlines()
    summary = orjson.loads((out / "summary.json").read_bytes())
    return manifest, [orjson.loads(line) for line in lines], summary


def journal_ids(fleet: SimFleet) -> list[str]:
    """Request ids in the router journal so far."""
    assert fleet.journal_path is not None
    if not fleet.journal_path.exists():
        return []
    return [orjson.loads(x)["request_id"] for x in fleet.journal_path.read_bytes().splitlines()]


def wait_for(predicate: Callable[[], bool], timeout: float = 30.0, what: str = "condition") -> None:
    """Poll ``predicate`` every 10 ms until true; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.01)
