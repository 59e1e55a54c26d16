"""A scheduled workload's run on the page: the offered load over time, the lengths' histograms,
attainment per input-length bucket, the densest second, and a timeline drawn per request up to 500
offers and in time bins beyond (a 10,000-request run's page stays under 2 MB); a runbook run's
section is left as it was."""

from __future__ import annotations

import re
from html import escape
from pathlib import Path

import numpy as np
import orjson
import pytest

from narwhal_report import read_inputs, render
from narwhal_report._binned_timeline import bin_width, timeline_bins
from narwhal_report._schedule_figures import bucket_label
from narwhal_report._schedule_section import EACH_MAX, densest_text
from narwhal_report._timeline import TIMELINE_CAPTION
from narwhal_trial import RequestRecord, read_run
from narwhal_trial.documents._schedule import ScheduleView
from narwhal_trial.run._schedule_view import schedule_view
from narwhal_trial.workload._schedule import Schedule, TraceSource

from ._kit import write_run_folder

MAX_BYTES = 2 * 1024 * 1024
SPEEDUP = 2.0
CAPTION = escape(TIMELINE_CAPTION)  # as the page writes it


def trace_schedule(requests: int, seed: int) -> Schedule:
    """A Mooncake-like trace window: bursty gaps (gamma, CV 2, 10/s at its own pace), prompts
    spread lognormally from 1 to 30,000 tokens, outputs from 1 to 2,048."""
    rng = np.random.default_rng(seed)
    gaps = rng.gamma(shape=0.25, scale=0.4, size=requests - 1)
    due = np.concatenate([[0.0], np.cumsum(gaps)])
    inputs = np.clip(rng.lognormal(7.3, 1.1, size=requests), 1, 30_000).astype(int)
    outputs = np.clip(rng.lognormal(5.0, 0.8, size=requests), 1, 2048).astype(int)
    source = TraceSource(path="/traces/conversation.jsonl", format="mooncake", sha256="12" * 32,
                         rows=requests, dropped_failures=0, start_s=0.0)  # fmt: skip
    return Schedule(
        source=source,
        due_offsets_ns=[round(t * 1e9) for t in due],
        input_tokens=[int(v) for v in inputs],
        output_tokens=[int(v) for v in outputs],
        block_tokens=512,
    )


def _records(schedule: Schedule, run_id: str) -> list[RequestRecord]:
    """One server whose prefill takes 15 us a prompt token and whose TPOT grows with the prompt:
    bursts queue, the longest prompts miss TPOT; every 997th offer is a lag miss, every 1499th
    an HTTP error."""
    records = []
    free_at = 0.0
    for n, due_ns in enumerate(schedule.offsets_ns(SPEEDUP)):
        due = due_ns / 1e9
        prompt, out = schedule.input_tokens[n], schedule.output_tokens[n]
        base = {"sequence": n, "request_id": f"{run_id}-{n:06d}", "due_s": due, "in_flight": 2,
                "http_status": None, "error": None, "ttft_s": None, "tpot_s": None,
                "e2e_s": None, "prompt_tokens": None, "completion_tokens": None, "chunks": 0,
                "finish_reason": None, "bytes_received": 0, "good": False,
                "miss_reason": None}  # fmt: skip
        if n % 997 == 5:
            records.append(RequestRecord.model_validate({
                **base, "sent": False, "sent_s": None, "lag_s": 0.051, "end_s": None,
                "status": "client_schedule_miss", "miss_reason": "lag", "bytes_sent": 0,
            }))  # fmt: skip
            continue
        sent = due + 0.0003 + 0.0001 * (n % 4)
        if n % 1499 == 7:
            records.append(RequestRecord.model_validate({
                **base, "sent": True, "sent_s": sent, "lag_s": sent - due, "end_s": sent + 0.01,
                "status": "http_error", "http_status": 503, "error": "HTTP 503",
                "bytes_sent": 4000,
            }))  # fmt: skip
            continue
        start = max(sent, free_at)
        free_at = start + prompt * 1.5e-5
        ttft = free_at - sent + 0.03
        tpot = 0.006 + 1.0e-6 * prompt
        end = sent + ttft + tpot * (out - 1)
        records.append(RequestRecord.model_validate({
            **base, "sent": True, "sent_s": sent, "lag_s": sent - due, "end_s": end,
            "status": "completed", "http_status": 200, "ttft_s": ttft, "tpot_s": tpot,
            "e2e_s": end - sent, "prompt_tokens": prompt, "completion_tokens": out, "chunks": out,
            "finish_reason": "length", "bytes_sent": 4000 + 4 * prompt, "bytes_received": 90 * out,
            "good": ttft <= 2.0 and tpot <= 0.0333,
        }))  # fmt: skip
    return records


def write_trace_run(out: Path, requests: int, seed: int) -> tuple[Path, ScheduleView]:
    """A finished run folder of a trace at SPEEDUP, as ``run`` writes it: the summary's
    ``schedule`` from ``schedule_view`` and ``--speedup`` in the manifest's arguments."""
    schedule = trace_schedule(requests, seed)
    run_id = f"trial-trace-{requests}"
    records = _records(schedule, run_id)
    out.mkdir(parents=True)
    rate = schedule.mean_rate(SPEEDUP)
    write_run_folder(out, records, run_id=run_id, rate=rate)
    view = schedule_view(schedule, SPEEDUP, records)
    summary = orjson.loads((out / "summary.json").read_bytes())
    summary["schedule"] = view.model_dump(mode="json")
    (out / "summary.json").write_bytes(orjson.dumps(summary))
    manifest = orjson.loads((out / "manifest.json").read_bytes())
    manifest["arguments"] = {"speedup": SPEEDUP}
    manifest["command"] = ["load_trial.py", "run", "--speedup", f"{SPEEDUP:g}"]
    (out / "manifest.json").write_bytes(orjson.dumps(manifest))
    return out, view


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, ScheduleView]]:
    """A 100-request and a 10,000-request run of a trace at SPEEDUP."""
    folder = tmp_path_factory.mktemp("schedule")
    return {
        "small": write_trace_run(folder / "small", 100, seed=3),
        "large": write_trace_run(folder / "large", 10_000, seed=4),
    }


@pytest.fixture(scope="module")
def pages(runs: dict[str, tuple[Path, ScheduleView]]) -> dict[str, bytes]:
    """Each run's page on its own."""
    return {name: render(read_inputs([path])) for name, (path, _) in runs.items()}


def _table_row(cells: list[str]) -> str:
    return "<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>"


def test_a_scheduled_summary_loads() -> None:
    """narwhal-report reads summary.json through narwhal-trial's Summary, which holds the
    ``schedule`` key (the report has no model of its own to widen)."""
    from narwhal_trial import Summary

    assert "schedule" in Summary.model_fields


@pytest.mark.parametrize("name", ["small", "large"])
def test_the_section_shows_all_four_views(
    name: str, runs: dict[str, tuple[Path, ScheduleView]], pages: dict[str, bytes]
) -> None:
    """Offered load, lengths, attainment per bucket (figure and a table row per bucket, values
    from the view), the densest second's line, and the timeline, under the schedule's heading."""
    page = pages[name].decode()
    view = runs[name][1]
    assert f'id="schedule-1-{name}"' in page
    assert f"Trial trace x2, mean {view.mean_rate:.3g} request/s: {name}</h3>" in page
    assert "Scheduled workload: trace at speedup 2x" in page
    for label in (
        f"offered load over time of {name}",
        f"input and output lengths of {name}",
        f"attainment per input-length bucket of {name}",
    ):
        assert f'aria-label="{label}"' in page, label
    assert page.count("<svg ") == 2 + 3 + 1  # CDFs and attainment, the 3 views, the timeline
    assert f"per {view.offered.bin_s:g} s" in page  # the offered load's title
    assert f"{view.mean_rate:.3f} requests/s" in page
    assert f"{view.offered_token_rate:,.0f} tokens/s (prompt + output)" in page
    assert f"input lengths ({sum(view.input_lengths.counts)})" in page
    assert len(view.buckets) >= 4
    for b in view.buckets:
        cells = [bucket_label(b.low, b.high), f"[{b.low}, {b.high})", str(b.requests),
                 str(b.good), f"{b.attainment:.3f}",
                 f"{b.interval.low:.3f} to {b.interval.high:.3f}"]  # fmt: skip
        assert _table_row(cells) in page, cells
        assert f"{b.good}/{b.requests}" in page  # written under its point in the figure
    d = view.densest_second
    assert d.requests >= 3 and d.max_lag_s is not None
    assert densest_text(d) in page
    assert f"worst lag {d.max_lag_s * 1000:.1f} ms" in page
    assert "each request&#x27;s lengths from the schedule" in page  # not the runbook's 8192 in
    assert "Timeline</h4>" in page


def test_bucket_attainment_follows_the_records(runs: dict[str, tuple[Path, ScheduleView]]) -> None:
    """The longest prompts miss TPOT in the fixture, so the top bucket is below target and named
    in the section's facts; the buckets' requests add up to the run's."""
    path, view = runs["large"]
    assert sum(b.requests for b in view.buckets) == 10_000
    top = view.buckets[-1]
    assert top.attainment < 0.95
    page = render(read_inputs([path])).decode()
    assert re.search(r"<th scope=\"row\">below target</th><td>[^<]*" + bucket_label(top.low,
                     top.high), page)  # fmt: skip


def test_a_large_run_is_binned_and_its_page_small(
    runs: dict[str, tuple[Path, ScheduleView]], pages: dict[str, bytes]
) -> None:
    """10,000 offers: the timeline is binned (at most 200 bins, every offer counted by outcome),
    no per-request timeline is drawn, and the page is under 2 MB."""
    page = pages["large"]
    assert len(page) < MAX_BYTES, len(page)
    print(f"page of a 10,000-request trace run: {len(page):,} bytes")  # shown with -s
    text = page.decode()
    run = read_run(runs["large"][0])
    bins = timeline_bins(run.records)
    assert bins.count <= 200
    assert sum(sum(v) for v in bins.outcomes.values()) == 10_000
    assert sum(bins.outcomes["good"]) == run.summary.good
    assert sum(bins.outcomes["schedule miss"]) == run.summary.counts["client_schedule_miss"] > 0
    assert 'aria-label="binned timeline of large"' in text
    assert 'aria-label="timeline of large"' not in text
    assert f"Binned timeline (10000 offers, more than {EACH_MAX}: aggregated in" in text
    assert f"in {bins.count} bins of {bins.width_s:g} s" in text
    assert f"good {run.summary.good}" in text  # the outcomes' legend
    assert CAPTION not in text


def test_a_small_run_draws_each_request(pages: dict[str, bytes]) -> None:
    """100 offers: the per-request timeline, titled with the trace's pace, and no bins."""
    text = pages["small"].decode()
    assert 'aria-label="timeline of small"' in text
    assert "binned timeline" not in text.lower()
    assert CAPTION in text
    assert "small: 100 offers (trace x2, mean " in text


def test_a_runbook_run_is_left_as_it_was(inputs: dict[str, Path]) -> None:
    """No schedule part, the per-request timeline and the runbook's lengths, three figures."""
    run = read_run(inputs["pass"])
    assert run.summary.schedule is None
    text = render(read_inputs([inputs["pass"]])).decode()
    assert "schedule-view" not in text and "Scheduled workload" not in text
    assert 'id="schedule-' not in text
    assert CAPTION in text
    assert 'aria-label="timeline of rate-0.5"' in text
    assert "rate-0.5: 200 offers at 0.5/s" in text
    assert "8192 in / 128 out" in text
    assert text.count("<svg ") == 3


def test_dropping_the_schedule_gives_the_runbook_section(
    runs: dict[str, tuple[Path, ScheduleView]], tmp_path: Path
) -> None:
    """The same run folder without ``schedule`` in its summary renders as a runbook run."""
    source = runs["small"][0]
    copy = tmp_path / "small"
    copy.mkdir()
    for name in ("manifest.json", "requests.jsonl"):
        (copy / name).write_bytes((source / name).read_bytes())
    summary = orjson.loads((source / "summary.json").read_bytes())
    del summary["schedule"]
    (copy / "summary.json").write_bytes(orjson.dumps(summary))
    text = render(read_inputs([copy])).decode()
    assert "Scheduled workload" not in text and text.count("<svg ") == 3
    assert f"small: 100 offers at {read_run(copy).manifest.rate:g}/s" in text


def test_bin_widths_and_labels() -> None:
    """Widths of 1, 2 or 5 x 10^k seconds, at most 200 bins; buckets labelled as [low, high)."""
    assert bin_width(0.0) == 1.0
    assert bin_width(500.0) == 5.0
    assert bin_width(1000.0) == 5.0
    assert bin_width(1000.1) == 10.0
    assert bin_width(30.0) == 0.2
    assert bin_width(0.05) == 0.001
    assert [bucket_label(lo, hi) for lo, hi in [(1, 512), (512, 1024), (1024, 2048), (16384,
            32768)]] == ["1-511", "512-1023", "1k-2k", "16k-32k"]  # fmt: skip
