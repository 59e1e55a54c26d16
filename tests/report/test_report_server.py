"""The server's view of a trial run in the report: the client's TTFT beside the server's (exact from
spans, or the merged histogram's steps), the per-engine split with the fleet row and the warnings,
the queue / prefill / decode breakdown and the span numbers; nothing new without server data, and
a malformed ``server.json`` refused naming it."""

from __future__ import annotations

import math
import re
import shutil
import statistics
from bisect import bisect_left
from pathlib import Path

import numpy as np
import pytest

from narwhal_report import ReportUsageError, read_inputs, render
from narwhal_report._server_figures import histogram_cdf, merged_ttft
from narwhal_report._server_section import interval_ms
from narwhal_trial import QuantileInterval, RequestRecord, TrialRun, read_run

from ._kit import write_run_fixture
from ._server_kit import (
    BOUNDS,
    SHORT_BOUNDS,
    add_server_data,
    added_s,
    engine_of,
    histogram,
    server_times,
    strip_server_data,
)
from .conftest import Cli

RATE = 3.6  # the fixture's server falls behind: TTFT grows from 0.24 s to about 4 s
SERVER_VIEW = re.compile(
    r'<div class="server-view">.*?(?=<h4>Client saturation evidence</h4>)', re.S
)


def _run(folder: Path, *, spans: bool, short: bool = False) -> Path:
    write_run_fixture(folder, rate=RATE, errors=4)

    def bounds(name: str) -> list[float]:
        return SHORT_BOUNDS if short and name == "h200-1.mixed" else BOUNDS

    add_server_data(folder, spans=spans, bounds_of=bounds)
    return folder


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Three runs at 3.6/s: with spans, with histograms only, and with one engine's histogram
    ending at 1 s (bounds that cannot be merged)."""
    folder = tmp_path_factory.mktemp("server")
    return {
        "spans": _run(folder / "spans", spans=True),
        "histograms": _run(folder / "histograms", spans=False),
        "short": _run(folder / "short", spans=False, short=True),
    }


@pytest.fixture(scope="module")
def pages(runs: dict[str, Path]) -> dict[str, str]:
    """Each run's page on its own."""
    return {name: render(read_inputs([path])).decode() for name, path in runs.items()}


def _done(path: Path) -> list[RequestRecord]:
    return [r for r in read_run(path).records if r.status == "completed"]


def _interval(values: list[float], q: float, bounds: list[float]) -> str:
    """The nearest-rank quantile's bucket, formatted as the report should."""
    value = sorted(values)[max(1, math.ceil(q * len(values))) - 1]
    i = bisect_left(bounds, value)
    low = bounds[i - 1] if i > 0 else 0.0
    if i == len(bounds):
        return f"&gt; {low * 1000:.1f} ms"
    return f"({low * 1000:.1f}, {bounds[i] * 1000:.1f}] ms"


def _cells(page: str, first: str) -> list[str]:
    """The cells of the table row whose first cell is ``first``."""
    row = re.search(rf"<tr><td>{re.escape(first)}</td>(.*?)</tr>", page)
    assert row, first
    return [first, *re.findall(r"<td>(.*?)</td>", row.group(1))]


def test_per_engine_rows_have_the_counts_shares_and_intervals(
    runs: dict[str, Path], pages: dict[str, str]
) -> None:
    """One row per engine (the router is not one): completed, aborted, share of the serving
    completions, TTFT mean and its p50 / p99 buckets as (low, high] ms; then the fleet row."""
    page, done = pages["spans"], _done(runs["spans"])
    assert "Server&#x27;s view: per engine" in page
    for name, aborted in (("h200-0.decode", "0"), ("h200-1.mixed", "2")):
        mine = [server_times(r)["ttft"] for r in done if engine_of(r) == name]
        cells = _cells(page, name)
        assert cells[1:6] == [name.split(".")[1], "yes", str(len(mine)), aborted,
                              f"{len(mine) / len(done):.1%}"]  # fmt: skip
        assert cells[6] == f"{np.mean(mine) * 1000:.1f} ms"
        assert cells[7:9] == [_interval(mine, 0.5, BOUNDS), _interval(mine, 0.99, BOUNDS)]
        assert cells[7] != cells[8]  # the fixture's p50 and p99 lie in different buckets
        assert cells[12] == "5.0 ms"  # the median client-added TTFT (3 to 7 ms) of its requests
    assert "<td>router</td>" not in page
    n = str(len(done))
    assert _cells(page, "fleet") == ["fleet", "3 read", n, n, "none (no prefill engine)", "engines"]


def test_spans_give_the_exact_server_cdf_the_gap_and_the_breakdown(
    runs: dict[str, Path], pages: dict[str, str]
) -> None:
    """With spans: two CDF panels (every completed request; every matched one, exact), the gap in
    the caption, the warnings of the join, the breakdown figure and the span numbers."""
    page, done = pages["spans"], _done(runs["spans"])
    matched = [r for r in done if r.server is not None]
    assert len(matched) == len(done) - 2
    assert page.count("<svg ") == 3 + 2
    assert f"{len(done)} completed</text>" in page  # the client panel's legend
    assert f"{len(matched)} with a span (exact)</text>" in page
    assert f"the {len(matched)} requests matched to their span" in page
    client = statistics.fmean(r.ttft_s or 0.0 for r in done)
    server = statistics.fmean(server_times(r)["ttft"] for r in done)
    assert (
        f"Fleet TTFT (engines): client mean {client * 1000:.1f} ms, server mean "
        f"{server * 1000:.1f} ms, client-added mean {(client - server) * 1000:.1f} ms" in page
    )
    assert "2 completed requests have no server span" in page  # ServerView.warnings
    assert "1 server spans match no client record of this run" in page
    assert "Server&#x27;s view: queue, prefill and decode (spans)" in page
    assert f"server time of {len(matched)} matched requests, per request</text>" in page
    added = [added_s(r) * 1000 for r in matched]
    p50, p99 = np.percentile(added, (50, 99))
    for text in (
        f"<td>{len(matched)} of {len(done)} completed requests</td>",
        "<td>2 completed without a span (first: trial-fixture-3.6-000000, ",
        "<td>1 span(s) of no record (first: trial-other-000001-0)</td>",
        '<th scope="row">warm-up spans</th><td>1</td>',
        f"<td>p50 {p50:.1f} ms · p99 {p99:.1f} ms · max {max(added):.1f} ms",
        "<td>0 request(s) whose client TTFT is below the server&#x27;s</td>",
        f"<td>h200-0.decode {sum(engine_of(r) == 'h200-0.decode' for r in matched)}, "
        f"h200-1.mixed {sum(engine_of(r) == 'h200-1.mixed' for r in matched)}</td>",
        "<td>127.0.0.1:4318: 7 export(s) (0 rejected)",
    ):
        assert text in page, text


def test_without_spans_the_merged_histogram_is_drawn_as_steps(
    runs: dict[str, Path], pages: dict[str, str]
) -> None:
    """Without spans: the serving engines' histograms merged (the router's left out), drawn as a
    step function whose caption says it knows only the bucket bounds; no breakdown."""
    page, done = pages["histograms"], _done(runs["histograms"])
    assert page.count("<svg ") == 3 + 1
    assert f"merged histogram, {len(done)} observations (steps at bucket bounds)" in page
    assert "the TTFT histograms of 2 serving engine(s) merged" in page
    assert "the histogram only knows the bucket bounds" in page
    assert "queue, prefill and decode (spans)" not in page
    assert _cells(page, "h200-0.decode")[12] == "n/a"  # no spans, no client-added median
    doc = read_run(runs["histograms"]).server
    assert doc is not None
    merged, _ = merged_ttft(doc)
    assert merged is not None
    values = [server_times(r)["ttft"] for r in done]
    assert merged == histogram(values, BOUNDS).model_copy(update={"sum": merged.sum})
    assert merged.sum == pytest.approx(sum(values))
    xs, ys = histogram_cdf(merged)
    assert xs == [0.0, *BOUNDS]
    assert ys == pytest.approx([0.0] + [sum(v <= b for v in values) / len(values) for b in BOUNDS])


def test_pages_that_cannot_be_merged_are_said_so(
    runs: dict[str, Path], pages: dict[str, str]
) -> None:
    """Different bounds: no server curve, the reason in the caption, and the engine whose
    histogram ends at 1 s shows its p99 as above that bound; a split fleet or a restarted page."""
    page = pages["short"]
    assert "none drawn: the engines&#x27; TTFT histograms have different bucket bounds" in page
    assert "no server TTFT distribution</text>" in page
    assert _cells(page, "h200-1.mixed")[8] == "&gt; 1000.0 ms"
    doc = read_run(runs["histograms"]).server
    assert doc is not None
    split = [p.model_copy(update={"role": "prefill"}) if p.name == "h200-0.decode" else p
             for p in doc.pages]  # fmt: skip
    merged, note = merged_ttft(doc.model_copy(update={"pages": split}))
    assert merged is None and note.startswith("a split fleet")
    restarted = [p.model_copy(update={"restarted": True}) if p.name == "h200-0.decode" else p
                 for p in doc.pages]  # fmt: skip
    merged, note = merged_ttft(doc.model_copy(update={"pages": restarted}))
    mixed = next(p for p in doc.pages if p.name == "h200-1.mixed")
    assert merged == mixed.histograms["vllm:time_to_first_token_seconds"]
    assert (
        note
        == "the TTFT histograms of 1 serving engine(s) merged (h200-0.decode not read: left out)"
    )


def test_intervals_are_formatted_in_ms() -> None:
    """(low, high] ms; above the last bound '> low ms'; unknown 'n/a'."""
    assert interval_ms(QuantileInterval(low=0.04, high=0.06)) == "(40.0, 60.0] ms"
    assert interval_ms(QuantileInterval(low=2560.0, high=None)) == "> 2560000.0 ms"
    assert interval_ms(QuantileInterval(low=None, high=0.005)) == "≤ 5.0 ms"
    assert interval_ms(None) == "n/a"


def test_a_run_without_server_data_renders_as_before(tmp_path: Path, runs: dict[str, Path]) -> None:
    """Strip the server data from a run folder: the page is the one with it less the server
    view, byte for byte, and shows nothing of the server."""
    folder = tmp_path / "spans"
    shutil.copytree(runs["spans"], folder)
    with_server = render(read_inputs([folder])).decode()
    strip_server_data(folder)
    run: TrialRun = read_run(folder)
    assert run.server is None and run.summary.server is None
    without = render(read_inputs([folder])).decode()
    assert len(SERVER_VIEW.findall(with_server)) == 1
    assert SERVER_VIEW.sub("", with_server) == without
    assert "server-view" not in without and "Server&#x27;s view" not in without
    assert without.count("<svg ") == 3


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("{", "Invalid JSON"),
        ('{"format": "narwhal.trial.server", "pages": []}', "run_id: Field required"),
        ('{"format": "narwhal.trial.server", "run_id": "elsewhere", "pages": []}',
         "server.json is of run elsewhere"),
    ],
)  # fmt: skip
def test_a_malformed_server_json_is_refused_naming_it(
    tmp_path: Path, runs: dict[str, Path], text: str, why: str
) -> None:
    """Bad JSON, a missing field, another run's file: the report's usual error, naming the file."""
    folder = tmp_path / "run"
    shutil.copytree(runs["histograms"], folder)
    (folder / "server.json").write_text(text)
    with pytest.raises(ReportUsageError) as caught:
        read_inputs([folder])
    message = caught.value.message
    assert message.startswith(f"{folder}: not a readable trial run: ")
    assert "server.json" in message and why in message


def test_the_command_refuses_a_malformed_server_json(cli: Cli, tmp_path: Path,
                                                     runs: dict[str, Path]) -> None:  # fmt: skip
    """Exit 2, one line naming server.json, nothing written."""
    folder = tmp_path / "run"
    shutil.copytree(runs["histograms"], folder)
    (folder / "server.json").write_text('{"format": "narwhal.trial.server"}')
    out = tmp_path / "r.html"
    proc = cli(str(folder), "--out", str(out))
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("narwhal-report: error: "), proc.stderr
    assert f"{folder / 'server.json'}" in lines[0]
    assert not out.exists()


def test_two_thousand_requests_are_binned(tmp_path: Path) -> None:
    """At 2,000 matched requests the breakdown draws the mean per bin of 20 sequence numbers
    (the added TTFT's median and range), and stays small."""
    folder = write_run_fixture(tmp_path / "big", rate=3.0, requests=2000)
    add_server_data(folder, spans=True, without_span=0)
    page = render(read_inputs([folder])).decode()
    assert "server time of 2000 matched requests, mean per 20 requests</text>" in page
    assert "in each bin of 20 sequence numbers" in page
    assert "(median and range per bin)" in page
    breakdown = next(s for s in re.findall(r"<svg .*?</svg>", page, re.S)
                     if "queue, prefill and decode per request" in s)  # fmt: skip
    assert len(breakdown) < 150_000
