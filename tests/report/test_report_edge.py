"""An edge folder (``load_trial.py edge``) in the report: the measured bracket beside the predicted
band on the attainment-against-rate figure, and a table of the search's trials."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from narwhal_report import Options, read_inputs, render

from ._kit import edge_trial, write_edge_document, write_run_fixture
from .conftest import Cli

# (rate, verdict, schedule misses): the fixture's server falls behind above ~3.3 request/s
TRIALS = [(2.0, "pass", 0), (4.0, "miss", 0), (2.828, "pass", 0), (3.364, "invalid", 5),
          (3.364, "pass", 0)]  # fmt: skip


def write_edge_fixture(folder: Path) -> Path:
    """An edge folder of five trials (one invalid, repeated) with a predicted band around 3."""
    trials = []
    for k, (rate, verdict, misses) in enumerate(TRIALS, start=1):
        run = f"trial-{k:02d}-rate-{rate:g}"
        write_run_fixture(folder / run, rate=rate, misses=misses)
        trials.append(edge_trial(folder, k, rate, run, verdict, repeat=int(k == 5)))
    predicted = {
        "pass_90": 2.5, "pass_50": 3.0, "pass_10": 3.6, "replications": 64,
        "fleet": "fleet.json", "fleet_sha256": "cd" * 32,
        "profiles": "profiles/fleet-profiles.json", "profiles_sha256": "ef" * 32,
        "generator": "narwhal-trial 0.1.0",
    }  # fmt: skip
    return write_edge_document(
        folder, trials, bracket=(3.364, 4.0), start="band", start_rate=2.0, predicted=predicted
    )


@pytest.fixture(scope="module")
def edge_page(tmp_path_factory: pytest.TempPathFactory, inputs: dict[str, Path]) -> str:
    """The page of the store and the edge folder."""
    folder = write_edge_fixture(tmp_path_factory.mktemp("edge") / "edge")
    found = read_inputs([inputs["store"], folder])
    assert len(found.edges) == 1 and not found.runs
    return render(found, Options(kv_transfer_s_per_token=2.5e-6)).decode()


def test_edge_section_draws_the_bracket_beside_the_band(edge_page: str) -> None:
    """A "Measured edges" section: the bracket and the band in the figure and in words, the
    curve predicted from the store, one table row per trial with its verdict."""
    assert 'id="edges"' in edge_page and 'id="edge-1-edge"' in edge_page
    assert 'href="#edge-1-edge"' in edge_page
    assert "1 edge search(es)" in edge_page
    for text in (
        "measured bracket 3.364 to 4/s",  # the figure's legend (text stays text)
        "predicted band, pass_90 to pass_10",
        "predicted pass_50 3/s",
        "highest pass",
        "lowest miss",
        "predicted from fleet-profiles.json",
        "highest pass 3.364 request/s, lowest miss 4 request/s, width 18.9%",
        "pass_90 2.5 request/s, pass_50 3 request/s, pass_10 3.6 request/s (64 replication(s)",
        "5 of at most 8, 200 requests each; started band at 2/s",
        "within tolerance: bracket found in 5 trial(s) (exit 0)",
    ):
        assert text in edge_page, text
    for run in ("trial-01-rate-2", "trial-04-rate-3.364", "trial-05-rate-3.364"):
        assert f"<td>{run}</td>" in edge_page, run
    assert 'class="badge na">INVALID<' in edge_page and "repeat 1" in edge_page
    assert edge_page.count("<svg ") == 3 * 2 + 1  # the store's 3 engines, the edge figure


def test_report_command_takes_an_edge_folder(cli: Cli, tmp_path: Path) -> None:
    """``narwhal-report EDGE --out`` writes the page; a broken edge.json is exit 2 naming it."""
    folder = write_edge_fixture(tmp_path / "edge")
    out = tmp_path / "report.html"
    proc = cli(str(folder), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "Measured edge: edge" in out.read_text()
    (folder / "edge.json").write_text('{"format": "narwhal.trial.edge"}')
    proc = cli(str(folder), "--out", str(tmp_path / "other.html"))
    assert proc.returncode == 2
    assert "not a readable edge search" in proc.stderr and "edge.json" in proc.stderr
    assert not (tmp_path / "other.html").exists()


def test_an_edge_trial_folder_that_is_not_its_rate_is_refused(tmp_path: Path) -> None:
    """edge.json and the trial's manifest must agree on the rate."""
    folder = write_edge_fixture(tmp_path / "edge")
    doc = orjson.loads((folder / "edge.json").read_bytes())
    doc["trials"][1]["rate"] = 5.0
    (folder / "edge.json").write_bytes(orjson.dumps(doc))
    with pytest.raises(Exception, match="says trial 2 ran at 5"):
        read_inputs([folder])
