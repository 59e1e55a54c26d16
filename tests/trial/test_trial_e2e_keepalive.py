"""The trial against engines that close idle connections: no offer is lost or mis-timed.

``drop_idle_after_s`` makes the client lose the keep-alive race every time (a request arriving on a
connection idle for longer is dropped unanswered and the connection closed); ``keep_alive_s``
shorter than the gaps between offers makes the engine close every idle connection first, as vLLM
does after 5 s. At 1 request/s a connection waits about a second between offers, past both.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from narwhal_sim.testing import sim_config

from .conftest import Cli, read_run, run_args, tiny_fleet

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(
    ("engine", "what"),
    [
        ({"faults": {"drop_idle_after_s": 0.5}}, "idle_drops"),
        ({"keep_alive_s": 0.6}, "idle_closes"),
    ],
    ids=["lose-the-race", "idle-close"],
)
def test_every_offer_completes_against_an_engine_closing_idle_connections(
    cli: Cli, tiny_workload: Path, tmp_path: Path, engine: dict[str, Any], what: str
) -> None:
    config = sim_config({"jitter": 0.0}, e0=engine)
    with tiny_fleet(tmp_path / "fleet", sim_config=config) as fleet:
        out = tmp_path / "run"
        done = cli(*run_args(fleet.urls["e0"], tiny_workload, out, rate=1, requests=6,
                             drain_preset="vllm"))  # fmt: skip
        connections = fleet.state("e0")["connections"]
    assert done.returncode == 0, done.stdout + done.stderr
    _, records, summary = read_run(out)
    assert [r["status"] for r in records] == ["completed"] * 6
    assert summary["counts"].get("connect_error", 0) == 0
    assert connections[what] >= 4  # the engine did close (or drop on) idle connections
    resent = sum(r["resends"] for r in records)
    assert summary["client"]["resends"] == resent
    if what == "idle_drops":
        assert resent >= 4  # each dropped offer was resent on a new connection and answered
        assert all(r["lag_s"] <= 0.25 for r in records)  # the resend's own send time
    else:
        assert resent == 0  # a connection the engine had closed was never written on
