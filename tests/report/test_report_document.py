"""The document as a person would see it: every section, nothing fetched, small, printable, and
the same bytes for the same inputs."""

from __future__ import annotations

from pathlib import Path

import pytest

from narwhal_report import Options, read_inputs, render

from ._kit import write_store_fixture
from ._page_checks import (
    assert_ids_unique_and_links_land,
    assert_nothing_fetched,
    assert_well_nested,
)

MAX_BYTES = 2 * 1024 * 1024
FEW = Options(replications=5)
"""The sweep's Monte Carlo at 200 requests per measured rate costs about 15 s of CPU at the
default 50 replications; these tests are about the page, not that figure."""


@pytest.fixture(scope="module")
def page(inputs: dict[str, Path]) -> str:
    """The page of the store and both runs."""
    found = read_inputs([inputs["store"], inputs["pass"], inputs["miss"]])
    return render(found, Options(kv_transfer_s_per_token=2.5e-6, replications=5)).decode()


def test_every_section_is_present(page: str) -> None:
    """A section per store, per engine, per trial, and the across-trials figure with prediction."""
    for ident in (
        "store-1",
        "profile-1-h200-0-prefill-0",
        "profile-1-h200-0-decode-1",
        "profile-1-h200-1-mixed-2",
        "trials",
        "trial-1-rate-0-5",
        "trial-2-rate-4",
        "across-trials",
        "sweep-1",
    ):
        assert f'id="{ident}"' in page, ident
        assert f'href="#{ident}"' in page, ident  # listed in the contents
    for heading in (
        "Engine h200-0.prefill",
        "Engine h200-1.mixed",
        "Trial 0.5 request/s: rate-0.5",
        "Trial 4 request/s: rate-4",
        "Attainment against rate",
        "Client saturation evidence",
        "Provenance (manifest)",
        "Binding evidence",
    ):
        assert heading in page, heading
    # 3 engines x 2 figures, 2 trials x 3 figures, 1 sweep figure
    assert page.count("<svg ") == 3 * 2 + 2 * 3 + 1
    assert "predicted from fleet-profiles.json" in page
    assert "highest passing rate" in page


def test_verdicts_and_statuses_are_shown(page: str) -> None:
    """The passing run says PASS and VALID, the missing one MISS and INVALID with its statuses."""
    assert page.count('class="badge ok">PASS<') >= 2  # trial section and sweep table
    assert page.count('class="badge bad">MISS<') >= 2
    assert 'class="badge bad">INVALID<' in page
    assert "http_error 6" in page and "client_schedule_miss 5" in page


def test_nothing_is_fetched(page: str) -> None:
    """No script, no external URL in src/href, no @import, no url(...) to the network; the only
    http(s) strings are XML namespaces and the records' own base URLs shown as text."""
    assert_nothing_fetched(page)


def test_print_stylesheet_and_text_not_glyphs(page: str) -> None:
    """A print stylesheet keeps figures whole; SVG text stays text (no embedded glyph paths)."""
    assert "@media print" in page and "break-inside: avoid" in page
    assert "<text" in page
    assert "glyph" not in page.lower() and "@font-face" not in page


def test_size_bound_for_200_requests_and_3_engines(page: str, inputs: dict[str, Path]) -> None:
    """Under 2 MB for a 200-request trial plus a three-engine profile (here: two such trials)."""
    alone = render(read_inputs([inputs["store"], inputs["miss"]]), FEW).decode()
    assert len(alone.encode()) < MAX_BYTES
    assert len(page.encode()) < MAX_BYTES


def test_same_inputs_same_bytes(inputs: dict[str, Path]) -> None:
    """Rendering twice gives identical bytes (no dates, stable SVG ids, a seeded Monte Carlo)."""
    paths = [inputs["store"], inputs["miss"]]
    assert render(read_inputs(paths), FEW) == render(read_inputs(paths), FEW)


def test_suspect_decode_fit_and_bursty_delivery_warn(tmp_path: Path) -> None:
    """A decode fit beyond the bounds and bursty cohorts get a warning box naming them."""
    store = write_store_fixture(tmp_path, decode_noise=0.9, bursty=True)
    page = render(read_inputs([store])).decode()
    assert page.count('class="warn"') == 3
    assert "beyond the bounds (suspect)" in page
    assert "load_trial.py check refuses it" in page
    assert "bursty delivery in 2 of 9 decode cohorts" in page
    assert "invalid: waiting requests during the cohort" in page


def test_a_sound_store_warns_only_about_its_invalid_cohort(inputs: dict[str, Path]) -> None:
    """The fixture's fits are within the bounds: no suspect-fit or bursty warning."""
    page = render(read_inputs([inputs["store"]])).decode()
    assert "suspect" not in page.replace("beyond the bounds (suspect)", "")
    assert "bursty" not in page
    assert "within the gate" in page and "within the bounds" in page


def test_no_prediction_without_a_fleet(tmp_path: Path, inputs: dict[str, Path]) -> None:
    """A store whose fleet file cannot be found still reports, and says why there is no curve."""
    store = write_store_fixture(tmp_path / "x")
    (tmp_path / "x" / "fleet.json").unlink()
    page = render(read_inputs([store, inputs["pass"], inputs["miss"]])).decode()
    assert "no fleet file of this store found (give --fleet)" in page
    assert "predicted from fleet-profiles.json" not in page


def test_every_id_is_unique_and_every_link_lands(page: str) -> None:
    """Valid HTML: no id twice (each inline SVG's matplotlib ids carry the figure's own prefix),
    every in-page link and every SVG reference names an id that exists, no two entries of the
    contents read the same, and every element closed in the order opened."""
    assert_ids_unique_and_links_land(page)
    assert_well_nested(page)
    assert page.count('id="svg1-figure_1"') == 1 and page.count('id="svg2-figure_1"') == 1
