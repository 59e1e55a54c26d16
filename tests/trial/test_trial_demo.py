"""``make demo`` end to end, time-scaled: fleet, profile, prepare, check, three rates, reconcile,
the measured edge, the report, the sweep's two runs compared."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from narwhal_trial import read_edge

from .conftest import REPO

pytestmark = pytest.mark.slow


def test_demo_ends_with_a_verdict_per_rate(tmp_path: Path) -> None:
    """The demo runs every step, prints a verdict for 0.5 and 1 request/s (pass) and for the rate
    past the fleet's edge (a miss, which predict shows from the throughput bound), measures the edge
    from the predicted band in at most 5 trials, compares the 1 request/s run with the 0.5 one
    (a verdict either way) and exits 0.

    Four times real speed, not faster: ``check`` refuses a decode fit beyond 20% mean error, and a
    simulator whose sub-millisecond steps cannot keep time on a loaded machine delivers in bursts.
    """
    proc = subprocess.run(
        [sys.executable, str(REPO / "tools" / "demo.py"), "--time-scale", "4",
         "--requests", "4", "--runs", str(tmp_path)],
        capture_output=True, text=True, timeout=240, check=False, cwd=REPO,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    out = proc.stdout
    for step in (
        "profile the fleet",
        "prepare the workload",
        "check before the trial",
        "predict 0.5 request/s (4 requests) from the profiles and the highest passing rate",
        "predict 1 request/s (4 requests) from the profiles",
        "reconcile the 0.5 request/s",
        "reconcile the 1 request/s",
        "past the edge: 12 request/s, 200 requests",
        "predict 12 request/s (200 requests) from the profiles",
        "reconcile the 12 request/s",
        "measure the edge from the predicted band (50 requests per trial)",
        "edge: predicted band pass_90",
        "verdict per rate",
    ):
        assert step in out, step  # fmt: skip
    assert "0.5 request/s measured:  PASS" in out and "1 request/s measured:  PASS" in out
    assert "0.5 request/s predicted: PASS" in out and "1 request/s predicted: PASS" in out
    assert "highest passing rate:" in out
    assert "12 request/s predicted: MISS (bound): at most " in out
    assert "== predicted capacity: sustainable " in out
    assert "12 request/s measured:  MISS: " in out
    assert "simulated fleet stopped" in out
    (folder,) = tmp_path.glob("demo-*")
    assert (folder / "trial" / "rate-1" / "summary.json").is_file()
    assert (folder / "trial" / "rate-12" / "summary.json").is_file()
    # the server's view of every rate: the client-added TTFT per request and the engines' split
    assert out.count("     server: client-added TTFT p50 ") == 3, out
    assert "engines h200-0.prefill " in out and "h200-1.mixed " in out
    rate_1 = json.loads((folder / "trial" / "rate-1" / "summary.json").read_text())
    spans = rate_1["server"]["spans"]
    assert spans["matched"] == spans["client_completed"] == 4 and spans["server_only"] == 0
    assert rate_1["server"]["fleet"]["server_completed"] == 4
    edge = read_edge(folder / "trial" / "edge")
    doc, b = edge.search, edge.search.bracket
    assert 1 <= len(doc.trials) <= 5 and doc.stop in ("within tolerance", "budget")
    assert doc.predicted is not None and doc.inputs.start == "band"
    assert doc.trials[0].rate == float(f"{doc.predicted.pass_50:.4g}")
    assert all(t.verdict in ("pass", "miss") for t in doc.trials)  # no schedule went invalid
    assert b.highest_pass == max((t.rate for t in doc.trials if t.verdict == "pass"), default=None)
    assert b.lowest_miss == min((t.rate for t in doc.trials if t.verdict == "miss"), default=None)
    assert f"after {len(doc.trials)} trial(s) of at most 5" in out
    assert "report: profiles, trials and the measured edge as one HTML page" in out
    assert out.strip().splitlines()[-1] == f"report: {folder / 'report.html'}"
    # the sweep's two runs compared: B at 1 request/s against A at 0.5 (4 and 2 scaled)
    assert "compare the 1 request/s run (B) with the 0.5 request/s run (A)" in out
    comparison = json.loads((folder / "trial" / "comparison.json").read_text())
    assert comparison["exit_code"] in (0, 2) and comparison["workloads_differ"] is False
    (pair,) = comparison["pairs"]
    assert (pair["rate_a"], pair["rate_b"]) == (2.0, 4.0)
    assert pair["attainment"]["requests_a"] == pair["attainment"]["requests_b"] == 4
    assert f"   verdict at 95%: {'worse: ' if comparison['worse'] else 'nothing'}" in out
    verdict = (
        f"worse: {'; '.join(comparison['worse'])}" if comparison["worse"] else "nothing got worse"
    )
    assert (
        f"== compared: 1 against 0.5 request/s at 95%: {verdict} (exit {comparison['exit_code']}; "
        f"{folder / 'trial' / 'comparison.json'})"
    ) in out
    page = (folder / "report.html").read_text()
    assert 'id="trial-2-rate-1"' in page and 'id="sweep-1"' in page
    assert 'id="trial-3-rate-12"' in page
    assert 'id="edge-1-edge"' in page and "measured bracket" in page
