"""A freshness probe on the page: its own section (each engine's drift per phase, the drifted ones
marked, every point behind it), and a malformed one refused."""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest

from narwhal_report import read_inputs, render

from ..trial._probe_kit import write_probe
from ._kit import write_store_fixture
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
THRESHOLD = 0.25


@pytest.fixture(scope="module")
def probed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The three-engine store, a probe of that store, and a probe of another store."""
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
    return found


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
