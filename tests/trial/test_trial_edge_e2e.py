"""``edge`` end to end: ``load_trial.py edge`` against a simulated engine that serves one request
at a time, so the edge is where requests start to queue.

No timing luck: the engine (tiny preset, four times slower than real time, ``max_num_seqs`` 1)
serves a 1,024-in / 32-out request in about 0.27 s with a TTFT of 16 ms. Five offers at 1.5 and 3
request/s never queue (TTFT far below the 0.15 s bound: pass); at 6 request/s the third offer
already waits over 0.2 s (miss). From 1.5 request/s the doubling search tries exactly those three
rates, and a tolerance of 100 % accepts the bracket [3, 6].
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from narwhal_sim.testing import SimFleet, sim_config
from narwhal_trial import read_edge

from .conftest import Cli, prepare_workload, read_run, tiny_fleet

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def serial_fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimFleet]:
    """One tiny engine behind the router, one sequence at a time, four times slower."""
    with tiny_fleet(
        tmp_path_factory.mktemp("edge-fleet"),
        sim_config=sim_config({"jitter": 0.0, "max_num_seqs": 1}),
        time_scale=0.25,
    ) as fleet:
        yield fleet


def test_edge_finds_the_bracket_of_a_serial_engine(
    cli: Cli, serial_fleet: SimFleet, tmp_path: Path
) -> None:
    """Three trials (1.5 and 3 pass, 6 misses), each a normal run folder; edge.json lists them
    with their verdicts and the bracket; one line per trial; exit 0."""
    base = str(serial_fleet.router_url)
    workload = prepare_workload(base, tmp_path)
    out = tmp_path / "edge"
    proc = cli(
        "edge", "--base", base, "--workload", str(workload), "--requests", "5",
        "--ttft", "0.15", "--tpot", "0.0333", "--attainment", "0.95", "--out", str(out),
        "--start-rate", "1.5", "--tolerance", "1", "--max-trials", "4", "--max-lag", "1",
        timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    edge = read_edge(out)
    doc = edge.search
    assert [(t.rate, t.verdict) for t in doc.trials] == [
        (1.5, "pass"),
        (3.0, "pass"),
        (6.0, "miss"),
    ]
    assert (doc.bracket.highest_pass, doc.bracket.lowest_miss) == (3.0, 6.0)
    assert doc.bracket.within_tolerance and doc.stop == "within tolerance" and doc.exit_code == 0
    assert sorted(p.name for p in out.iterdir()) == [
        "edge.json", "trial-01-rate-1.5", "trial-02-rate-3", "trial-03-rate-6",
    ]  # fmt: skip
    for trial, run in zip(doc.trials, edge.runs, strict=True):
        manifest, records, summary = read_run(out / trial.run)
        assert manifest["rate"] == trial.rate and manifest["command"][2] == "edge"
        assert len(records) == 5 and summary["client_schedule_valid"]
        assert summary["exit_code"] == trial.exit_code and summary["good"] == trial.good
        assert run.summary.drain_s and run.summary.warmup_status == "completed"
    lines = proc.stdout.strip().splitlines()
    assert lines[0] == (
        "edge: doubling from 1.5/s, then bisecting to within 100.0% in at most 4 trials of 5 "
        "requests"
    )
    assert lines[1].startswith("trial 1 at 1.5/s: 5/5 good (need 5) -> PASS; bracket: pass")
    assert (
        lines[3].startswith("trial 3 at 6/s: ")
        and "-> MISS; bracket: pass 3/s, miss 6/s" in lines[3]
    )
    assert lines[4].startswith("edge: highest pass 3/s, lowest miss 6/s (width 100.0%) after 3")
