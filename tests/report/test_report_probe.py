"""A freshness probe on the page: its own section (each engine's drift per phase, the drifted ones
marked, every point behind it), a malformed one refused, and the sweep's Monte Carlo table drawn
through the probe of its store exactly as ``predict --calibrate PROBE`` draws it."""

from __future__ import annotations

import re
from decimal import Decimal
from html import escape
from pathlib import Path

import orjson
import pytest

from narwhal_report import Options, read_inputs, render
from narwhal_trial import PredictRequest, TrialShape, TrialTarget, predict, read_run

from ..trial._probe_kit import write_probe
from ._kit import write_run_fixture, write_store_fixture
from ._page_checks import assert_ids_unique_and_links_land, assert_well_nested
from .conftest import Cli

IIDS = ("h200-0.prefill", "h200-0.decode", "h200-1.mixed")
DRIFTED = "h200-0.prefill"
# per engine: the prefill factors, the decode factors; one engine's prefill 1.3 times its profile
# (past the threshold, 0.25), the others' 1.2 and 1.1 (within it)
FACTORS = {
    iid: ([1.3, 1.35, 1.28], [1.02, 1.05, 1.0])
    if iid == DRIFTED
    else ([1.1, 1.3, 1.2, 1.25, 1.15], [1.05, 1.1, 1.0, 1.15, 1.1])
    for iid in IIDS
}
# tight enough that the fleet as predict believes the probe (its 1.1-1.3 factors at a quarter of
# their log: about 5 % slower than profiled) is near its edge at 2/s
TTFT_S = "0.25"
RATES = (2.0, 3.0)
REPLICATIONS = 20
THRESHOLD = 0.25


@pytest.fixture(scope="module")
def probed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The three-engine store, two 40-request runs of one workload (TTFT ≤ 0.25 s) at 2 and 3/s,
    a probe of that store, and a probe of another store."""
    folder = tmp_path_factory.mktemp("probed")
    store = write_store_fixture(folder)
    other = write_store_fixture(folder / "other", decode_noise=0.05)
    found = {
        "store": store,
        "probe": write_probe(
            folder / "probe.json", folder / "fleet.json", store, FACTORS, threshold=THRESHOLD
        ),
        "other-probe": write_probe(
            folder / "other-probe.json", folder / "fleet.json", other, FACTORS, threshold=THRESHOLD
        ),
    }
    for rate in RATES:
        found[f"rate-{rate:g}"] = write_run_fixture(
            folder / "trial" / f"rate-{rate:g}", rate=rate, requests=40, ttft_s=TTFT_S
        )
    return found


def _runs(probed: dict[str, Path]) -> list[Path]:
    return [probed[f"rate-{rate:g}"] for rate in RATES]


def _section(page: str, ident: str) -> str:
    """The HTML of the section whose heading has id ``ident``, up to the next heading of its
    level or above."""
    start = page.index(f'id="{ident}"')
    level = page[page.rindex("<h", 0, start) + 2]
    end = re.compile(f"<h[1-{level}] ").search(page, start)
    return page[start : end.start() if end else len(page)]


def _row(html: str, first_cell: str) -> str:
    """The table row whose first cell reads ``first_cell``."""
    rows = re.findall(r"<tr><td>" + re.escape(first_cell) + r"</td>.*?</tr>", html)
    assert len(rows) == 1, (first_cell, rows)
    return rows[0]


def test_the_probe_section_shows_each_engine_drift(probed: dict[str, Path]) -> None:
    """Per engine its factor and interval in each phase; the drifted engine marked DRIFTED (and
    in the warning box), the others WITHIN; the store it compared with matched to the one given;
    each engine's points with their measured values, reference and factors."""
    page = render(read_inputs([probed["store"], probed["probe"]])).decode()
    assert_ids_unique_and_links_land(page)
    assert_well_nested(page)
    section = _section(page, "probe-1")
    assert "Freshness probe: probe.json" in section
    assert f"the store given as {probed['store']}" in section
    assert "drifted when |factor - 1| &gt; 0.25" in section
    for iid in IIDS:
        row = _row(section, iid)
        prefill, decode = (
            f"{sorted(f)[len(f) // 2]:.3f} [{min(f):.3f}, {max(f):.3f}]" for f in FACTORS[iid]
        )
        assert f"<td>{iid}</td><td>{prefill}</td><td>{decode}</td>" in row, row
        marked = 'class="badge bad">DRIFTED<' in row
        assert marked == (iid == DRIFTED), row
        assert ('class="badge ok">WITHIN<' in row) == (iid != DRIFTED), row
    warning = section.split('class="warn"', 1)[1].split("</div>", 1)[0]
    assert f"engine {DRIFTED} drifted past ±0.25: prefill 1.300 times" in warning
    assert not [iid for iid in IIDS if iid != DRIFTED and iid in warning]
    phases, points = _section(page, f"probe-1-{DRIFTED.replace('.', '-')}").split("</table>", 1)
    phase = _row(phases, "prefill")
    assert "<td>1.300</td><td>[1.280, 1.350]</td><td>3</td>" in phase
    assert 'class="badge bad">DRIFTED<' in phase
    assert 'class="badge ok">WITHIN<' in _row(phases, "decode")
    point = re.search(r"<tr><td>prefill</td><td>128</td><td>1</td>.*?</tr>", points)
    assert point is not None
    assert "13.0 ms, 13.5 ms, 12.8 ms" in point.group(0)
    assert "10.0 ms (samples)" in point.group(0) and "1.300, 1.350, 1.280" in point.group(0)
    assert page.count("<svg ") == 3 * 2 + 1  # the store's engines, the drift figure


def test_a_probe_of_another_store_is_said_so(probed: dict[str, Path]) -> None:
    """Alone, the probe's store is not given; beside a different store, it is not that one."""
    alone = _section(render(read_inputs([probed["probe"]])).decode(), "probe-1")
    assert "no store given" in alone
    beside = _section(
        render(read_inputs([probed["store"], probed["other-probe"]])).decode(), "probe-1"
    )
    assert "no store given here has this SHA-256" in beside
    assert "the store given as" not in beside


@pytest.mark.parametrize(
    ("where", "change", "words"),
    [
        ("factor", ("engines", "h200-0.decode", "decode", "factor"), -1.0),
        ("format_version", ("format_version",), 2),
    ],
)
def test_a_malformed_probe_is_exit_2_naming_the_json_path(
    cli: Cli, probed: dict[str, Path], tmp_path: Path, where: str, change: tuple[str, ...],
    words: object,
) -> None:  # fmt: skip
    """A probe with a bad value: exit 2, one line naming the file and the value's JSON path,
    nothing written (an earlier page left as it was)."""
    doc = orjson.loads(probed["probe"].read_bytes())
    target = doc
    for key in change[:-1]:
        target = target[key]
    target[change[-1]] = words
    bad = tmp_path / "bad-probe.json"
    bad.write_bytes(orjson.dumps(doc))
    out = tmp_path / "report.html"
    out.write_text("earlier")
    proc = cli(str(probed["store"]), str(bad), "--out", str(out))
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    path = {"factor": 'engines["h200-0.decode"].decode.factor', "format_version": "format_version"}
    assert lines[0].startswith(
        f"narwhal-report: error: {bad}: not a readable freshness probe: {path[where]}: "
    ), lines[0]
    assert out.read_text() == "earlier"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad-probe.json", "report.html"]


def _predicted(probed: dict[str, Path], rate: float, calibrate: Path | None) -> dict[str, str]:
    """What ``predict`` gives at ``rate`` for the runs' workload, as the sweep table shows it."""
    shape = TrialShape(8192, 128, 40, 0.0, max_in_flight=64)
    target = TrialTarget(Decimal(TTFT_S), Decimal("0.0333"), Decimal("0.95"))
    store = probed["store"]
    request = PredictRequest(
        store.parent.parent / "fleet.json", store, None, shape, target, rate, False,
        replications=REPLICATIONS, seed=0, calibrate=calibrate,
    )  # fmt: skip
    p = predict(request).prediction
    assert p is not None and p.spread_sources is not None
    s = p.spread_sources
    return {
        "median": f"{p.attainment:.3f} [{p.attainment_interval.low:.3f}, "
        f"{p.attainment_interval.high:.3f}]",
        "pass": f"{p.pass_probability:.1%}",
        "widths": f"<td>{s.engine_speed:.3f} ({s.speed_from})</td><td>{s.fits_bootstrap:.3f}</td>"
        f"<td>{s.request_noise:.3f}</td><td>{s.trial_sampling:.3f}</td>",
        "engine_speed": f"{s.engine_speed}",
    }


def _sweep(page: str) -> str:
    return _section(page, "sweep-1")


def test_the_sweep_draws_its_monte_carlo_through_the_probe(probed: dict[str, Path]) -> None:
    """With a probe of the store: the section says each engine's speed came from that probe, and
    each measured rate's row is what ``predict --calibrate PROBE`` gives there: the median and
    its range, the pass probability and the four sources' widths, engine speed from the probe
    (its width not 0: the probe's factors vary)."""
    paths = [probed["store"], *_runs(probed), probed["probe"]]
    page = render(read_inputs(paths), Options(replications=REPLICATIONS)).decode()
    sweep = _sweep(page)
    assert escape(f"each engine's speed from the freshness probe {probed['probe']}") in sweep
    assert f"({REPLICATIONS} replications, seed 0)" in sweep
    for header in ("engine speed", "fits", "request noise", "trial sampling"):
        assert f"<th>{header}</th>" in sweep
    for rate in RATES:
        expected = _predicted(probed, rate, probed["probe"])
        row = _row(sweep.rsplit("Monte Carlo from", 1)[1], f"{rate:g}/s")
        run = read_run(probed[f"rate-{rate:g}"]).summary
        assert f"{run.good}/{run.requests} = {run.good / run.requests:.3f}" in row
        assert f"<td>{expected['median']}</td><td>{expected['pass']}</td>" in row, row
        assert expected["widths"] in row, row
    assert float(_predicted(probed, RATES[0], probed["probe"])["engine_speed"]) > 0
    assert "hollow diamonds: the Monte Carlo median" in sweep


def test_without_a_probe_of_its_store_the_speed_is_the_sweeps(probed: dict[str, Path]) -> None:
    """A probe of another store is not used: the section says the speed came from the profile
    sweep's history and every row is ``predict`` without a probe (speed from the sweep)."""
    paths = [probed["store"], *_runs(probed), probed["other-probe"]]
    page = render(read_inputs(paths), Options(replications=REPLICATIONS)).decode()
    sweep = _sweep(page)
    assert escape("each engine's speed from its profile sweep's history (no probe of") in sweep
    assert "freshness probe" not in sweep and "(probe)" not in sweep
    for rate in RATES:
        expected = _predicted(probed, rate, None)
        row = _row(sweep.rsplit("Monte Carlo from", 1)[1], f"{rate:g}/s")
        assert f"<td>{expected['median']}</td><td>{expected['pass']}</td>" in row, row
        assert expected["widths"] in row and "(sweep)" in row, row


def test_one_replication_leaves_the_monte_carlo_out(
    cli: Cli, probed: dict[str, Path], tmp_path: Path
) -> None:
    """``--replications 1``: the curve of the fits alone, no Monte Carlo table, and a line saying
    so; ``--replications`` beside ``--compare`` is refused."""
    out = tmp_path / "report.html"
    proc = cli(str(probed["store"]), *map(str, _runs(probed)), "--replications", "1", "--out",
               str(out))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    sweep = _sweep(out.read_text())
    assert "no Monte Carlo at the measured rates (--replications 1)" in sweep
    assert "Monte Carlo from" not in sweep and "predicted from fleet-profiles.json" in sweep
    runs = _runs(probed)
    proc = cli("--compare", str(runs[0]), str(runs[1]), "--replications", "5", "--out",
               str(tmp_path / "c.html"))  # fmt: skip
    assert proc.returncode == 2 and "--replications" in proc.stderr
    assert not (tmp_path / "c.html").exists()
