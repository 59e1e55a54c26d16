"""``narwhal-report --compare A B``: the comparison page from hand-written run and edge folders
(the verdict table, both sides' distributions, the edges' brackets, the engines' fits), every bad
input as one line with nothing written, and the page as headless Chromium draws it."""

from __future__ import annotations

import re
import struct
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import orjson
import pytest

from narwhal_report import ReportUsageError, render_comparison, write_comparison
from narwhal_trial import CompareRequest
from narwhal_trial.documents._comparison import FitChange

from ..trial._run_kit import write_lognormal_run as _run
from ._kit import edge_trial, write_edge_document, write_run_fixture
from ._page_checks import (
    assert_ids_unique_and_links_land,
    assert_nothing_fetched,
    assert_well_nested,
)
from .conftest import Cli

REPO = Path(__file__).resolve().parents[2]
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def sides(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A baseline run, a change whose TPOT is 15 % slower, and a run that fell behind its
    schedule."""
    folder = tmp_path_factory.mktemp("sides")
    return {
        "a": _run(folder / "baseline", 1),
        "b": _run(folder / "change", 2, tpot_factor=1.15),
        "invalid": _run(folder / "late", 3, valid=False),
    }


@pytest.fixture(scope="module")
def page(sides: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> str:
    """The comparison page as the command writes it."""
    out = tmp_path_factory.mktemp("page") / "compare.html"
    script = Path(sys.executable).parent / "narwhal-report"
    done = subprocess.run(
        [str(script), "--compare", str(sides["a"]), str(sides["b"]), "--out", str(out)],
        capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"wrote report to {out}"
    return out.read_text()


def _rows(page: str) -> dict[str, tuple[str, list[str]]]:
    """The verdict table's rows by measure: the row's class and its cells' text."""
    table = page.split('class="grid verdicts"', 1)[1].split("</table>", 1)[0]
    rows = {}
    for cls, cells in re.findall(r'<tr class="([^"]+)">(.*?)</tr>', table, re.S):
        texts = [re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<td>(.*?)</td>", cells, re.S)]
        rows[texts[1]] = (cls, texts)
    return rows


def test_the_verdict_table_says_tpot_got_worse(page: str) -> None:
    """A row per measure at the one rate pair: TPOT p50 and p99 worse (red rows, positive
    intervals), TTFT and attainment no detectable difference; the overall line names them."""
    rows = _rows(page)
    assert set(rows) == {"attainment", "TTFT p50", "TTFT p99", "TPOT p50", "TPOT p99"}
    for measure in ("TPOT p50", "TPOT p99"):
        cls, cells = rows[measure]
        assert cells[-1] == "worse" and "v-bad" in cls, cells
        interval = re.search(r"\[([-+][\d.]+), ([-+][\d.]+)\]", cells[4])
        assert interval is not None and float(interval.group(1)) > 0, cells
        assert cells[5].endswith(" ms")  # the detectable difference
    for measure in ("attainment", "TTFT p50", "TTFT p99"):
        assert rows[measure][1][-1] == "no detectable difference"
    assert "4 request/s" in rows["attainment"][1][0] and "A baseline · B change" in page
    assert 'class="badge bad">worse<' in page
    overall = re.search(r'<p class="overall bad">(.*?)</p>', page, re.S)
    assert overall is not None
    assert "TPOT p50 at 4 request/s; TPOT p99 at 4 request/s" in overall.group(1)


def test_both_sides_distributions_and_attainment_are_drawn(page: str) -> None:
    """One TTFT and TPOT figure for the pair, each side's run in its legend and the counts in
    the panels' titles (text stays text), the SLO lines named; attainment against rate with both
    sides."""
    assert page.count('aria-label="TTFT and TPOT distributions, A and B, at 4 request/s"') == 1
    for text in ("A: baseline", "B: change", "TTFT (A 200, B 200 measured)",
                 "TPOT (A 200, B 200 measured)", "SLO 2 s", "SLO 0.0333 s"):  # fmt: skip
        assert text in page, text
    assert 'aria-label="attainment against rate, A and B"' in page
    assert page.count("<svg ") == 2
    for ident in ("verdicts", "what-differs", "latency", "latency-1-4-request-s", "attainment"):
        assert f'id="{ident}"' in page and f'href="#{ident}"' in page, ident


def test_the_page_is_valid_and_fetches_nothing(page: str) -> None:
    """No id twice, every link landing, every element closed in order; no script, nothing
    fetched."""
    assert_ids_unique_and_links_land(page)
    assert_well_nested(page)
    assert_nothing_fetched(page)
    assert page.startswith("<!DOCTYPE html>")


def test_same_sides_same_bytes(sides: dict[str, Path]) -> None:
    """The bootstrap is seeded and the page holds no date: drawing twice gives the same bytes."""
    request = CompareRequest(sides["a"], sides["b"])
    assert render_comparison(request) == render_comparison(request)


def _edge(folder: Path, service_s: float, rates: list[float]) -> Path:
    """An edge folder of trials at ``rates`` (the fixture's server passes below ~1 / (0.3 x
    ``service_s``) request/s) and the bracket they give."""
    trials = []
    for k, rate in enumerate(rates, start=1):
        run = f"trial-{k:02d}-rate-{rate:g}"
        write_run_fixture(folder / run, rate=rate, service_s=service_s)
        ok = orjson.loads((folder / run / "summary.json").read_bytes())["pass"]
        trials.append(edge_trial(folder, k, rate, run, "pass" if ok else "miss"))
    passed = [t["rate"] for t in trials if t["verdict"] == "pass"]
    missed = [t["rate"] for t in trials if t["verdict"] == "miss"]
    return write_edge_document(
        folder, trials, bracket=(max(passed), min(missed)), start="doubling", start_rate=rates[0]
    )


def test_two_edges_draw_both_brackets_and_their_verdict(tmp_path: Path) -> None:
    """Two edge searches, B's server a third faster: the rates both ran are paired, each
    bracket is on the attainment figure, and B's edge is better (its highest pass is above A's
    lowest miss)."""
    a = _edge(tmp_path / "edge-a", 1.0, [2.0, 4.0, 2.8, 3.2])
    b = _edge(tmp_path / "edge-b", 0.66, [2.0, 4.0, 4.8, 5.6])
    page = render_comparison(CompareRequest(a, b)).decode()
    assert "A measured bracket 3.2 to 4/s" in page and "B measured bracket 4.8 to 5.6/s" in page
    edge = page.split("<h4>Measured edges</h4>", 1)[1].split("</table>", 1)[0]
    assert 'class="badge ok">better<' in edge and "B passed 4.8 request/s" in edge
    rows = re.findall(r"<strong>(\d+ request/s)</strong>", page)
    assert rows == ["2 request/s", "4 request/s"]  # the loads both searches ran
    assert page.count('aria-label="TTFT and TPOT distributions, A and B') == 2
    assert_ids_unique_and_links_land(page)
    assert_well_nested(page)


def test_two_sets_of_runs_pair_by_rate(tmp_path: Path) -> None:
    """Folders of run folders: the rates both sides ran are paired (lowest first); a rate only
    one side ran is not judged, and both sets are on the attainment figure."""
    for side, rates in (("set-a", (1.0, 4.0)), ("set-b", (1.0, 2.0, 4.0))):
        for rate in rates:
            write_run_fixture(tmp_path / side / f"rate-{rate:g}", rate=rate)
    page = render_comparison(CompareRequest(tmp_path / "set-a", tmp_path / "set-b")).decode()
    assert re.findall(r"<strong>(\d+ request/s)</strong>", page) == ["1 request/s", "4 request/s"]
    assert "folder of run folders: 3 runs at 1, 2, 4 request/s" in page
    attainment = page.split('aria-label="attainment against rate, A and B"', 1)[1]
    legend = attainment.split("</svg>", 1)[0]
    assert "A set-a" in legend and "B set-b" in legend and "hollow: missed" in legend
    assert_ids_unique_and_links_land(page)


def test_engine_fits_are_a_table_and_a_figure(sides: dict[str, Path]) -> None:
    """With profiles compared, each engine's fits in brief under the verdicts, and its section:
    every point's ratio B / A with its interval and verdict."""
    changes = [
        FitChange(engine="h200-0.prefill", phase="prefill", at="8192 tokens", a_s=0.30,
                  b_s=0.36, ratio=1.2, low=1.12, high=1.28, verdict="worse"),
        FitChange(engine="h200-1.decode", phase="decode", at="concurrency 16 at 8192 tokens",
                  a_s=0.021, b_s=0.0205, ratio=0.976, low=0.95, high=1.01,
                  verdict="no detectable difference"),
    ]  # fmt: skip
    request = CompareRequest(sides["a"], sides["a"], profiles=lambda _c, _rng: changes)
    page = render_comparison(request).decode()
    assert 'id="engine-fits"' in page and 'href="#engine-fits"' in page
    assert "1.200 [1.120, 1.280]" in page and "0.976 [0.950, 1.010]" in page
    assert 'aria-label="fitted latency of B over A per engine and point"' in page
    assert "h200-0.prefill prefill at 8192 tokens" in page  # the overall line and the figure
    brief = page.split("<h4>Engine fits</h4>", 1)[1].split("</table>", 1)[0]
    assert "1 worse, 0 better" in brief and 'class="badge bad">worse<' in brief
    assert_ids_unique_and_links_land(page)


def _one_error_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("narwhal-report: error: "), stderr
    return lines[0]


BAD: dict[str, tuple[tuple[str, ...], str]] = {
    "one-path": (("--compare", "{a}", "--out", "{out}"), "takes two paths, A and B"),
    "one-path-last": (("--out", "{out}", "--compare", "{a}"), "'--compare' requires 2 arguments"),
    "with-paths": (("{a}", "--compare", "{a}", "{b}", "--out", "{out}"), "takes no PATH beside"),
    "invalid-schedule": (("--compare", "{a}", "{invalid}", "--out", "{out}"),
                         "did not keep its schedule"),
    "missing-side": (("--compare", "{a}", "{missing}", "--out", "{out}"), "does not exist"),
    "confidence": (("--compare", "{a}", "{b}", "--confidence", "0.2", "--out", "{out}"),
                   "--confidence must be in [0.5, 0.999]"),
    "seed-alone": (("{a}", "--seed", "3", "--out", "{out}"), "--seed: only with --compare"),
    "fleet": (("--compare", "{a}", "{b}", "--fleet", "{a}", "--out", "{out}"),
              "not with --compare"),
    "nothing": (("--out", "{out}"), "or --compare A B"),
}  # fmt: skip
"""Each bad command line (``{a}``, ``{b}``: the sides; ``{invalid}``: a run that fell behind;
``{missing}``: no such path) and what its error line says."""


@pytest.mark.parametrize(("args", "needle"), list(BAD.values()), ids=list(BAD))
def test_bad_input_is_one_line_exit_2_and_nothing_written(
    cli: Cli, sides: dict[str, Path], tmp_path: Path, args: tuple[str, ...], needle: str
) -> None:
    """Exit 2, one ``narwhal-report: error:`` line naming the problem, nothing on stdout, and no
    file written."""
    out = tmp_path / "compare.html"
    names = {**{k: str(v) for k, v in sides.items()}, "missing": str(tmp_path / "nope")}
    proc = cli(*(a.format(out=out, **names) for a in args))
    assert proc.returncode == 2, proc.stderr
    assert needle in _one_error_line(proc.stderr)
    assert proc.stdout == ""
    assert list(tmp_path.iterdir()) == []


def test_the_library_refuses_sides_and_leaves_out_alone(
    sides: dict[str, Path], tmp_path: Path
) -> None:
    """``write_comparison`` raises ReportUsageError for sides compare refuses; an earlier page at
    ``out`` stays as it was."""
    out = tmp_path / "compare.html"
    out.write_text("earlier")
    with pytest.raises(ReportUsageError, match="did not keep its schedule"):
        write_comparison(CompareRequest(sides["a"], sides["invalid"]), out)
    assert out.read_text() == "earlier"


@pytest.fixture
def browser(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The conformance tier's headless Chromium driver (the repository root on sys.path only
    inside this fixture); skips when Chromium is not installed."""
    monkeypatch.syspath_prepend(str(REPO))
    import tools.conformance._browser as module

    if module.chromium() is None:
        pytest.skip("chromium is not installed (/usr/bin/chromium): no screenshot to take")
    return module


def test_chromium_draws_the_page(browser: ModuleType, page: str, tmp_path: Path) -> None:
    """Headless Chromium renders the page into a non-empty PNG (kept in the test's folder to be
    looked at), its DOM holds the verdict table, and nothing reached its console."""
    html = tmp_path / "compare.html"
    html.write_text(page)
    shot = tmp_path / "compare.png"
    rendered = browser.render(html, shot)
    data = shot.read_bytes()
    assert data.startswith(PNG_SIGNATURE) and len(data) > 10_000
    width, height = struct.unpack(">II", data[16:24])  # the IHDR chunk
    assert width > 0 and height > 0
    assert "TPOT p99" in rendered.dom and "grid verdicts" in rendered.dom
    assert rendered.console == []
