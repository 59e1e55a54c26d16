"""A scheduled workload's part of its trial section (``summary.json`` ``schedule``: a replayed
trace or synthetic arrivals): the schedule's facts and its densest second, the offered load over
time, the lengths' histograms, attainment per input-length bucket (figure and table), and the
run's timeline: per request up to ``EACH_MAX`` offers, else aggregated in time bins so a run of
thousands of requests stays readable and the page small."""

from __future__ import annotations

from decimal import Decimal
from typing import Final

from narwhal_report._binned_timeline import binned_timeline_figure, timeline_bins
from narwhal_report._html import Markup, facts, figure, join, ms, slug, table, tag
from narwhal_report._schedule_figures import (
    bucket_label,
    buckets_figure,
    lengths_figure,
    offered_figure,
)
from narwhal_report._timeline import OUTCOMES, TIMELINE_CAPTION, timeline_figure
from narwhal_trial import DensestSecond, ScheduleView, TrialRun

EACH_MAX: Final = 500
"""Up to this many offers the timeline draws each request; beyond, time bins."""
BUCKET_HEAD: Final = ("input length", "tokens", "requests", "good", "attainment", "95% interval")


def pace_text(view: ScheduleView) -> str:
    """How the offers came, for the timelines' titles: ``trace x2, mean 3.1/s``."""
    return f"({view.source} x{view.speedup:g}, mean {view.mean_rate:.3g}/s)"


def densest_text(d: DensestSecond) -> str:
    """The densest second in a line: its requests, when, the worst lag and the misses."""
    lag = "none sent" if d.max_lag_s is None else ms(d.max_lag_s)
    return (
        f"{d.requests} requests due in [{d.start_s:.3f} s, {d.start_s + 1:.3f} s); "
        f"worst lag {lag}; {d.misses} schedule miss(es)"
    )


def _facts(run: TrialRun, view: ScheduleView) -> Markup:
    requests = sum(view.offered.requests)
    bad = [b for b in view.buckets if b.attainment < float(Decimal(run.summary.attainment_target))]
    return facts(
        [
            ("source", f"{view.source}, speedup {view.speedup:g}x"),
            ("requests", f"{requests} over {view.span_s:.1f} s"),
            ("mean rate", f"{view.mean_rate:.3f} requests/s"),
            ("offered tokens", f"{view.offered_token_rate:,.0f} tokens/s (prompt + output)"),
            ("densest second", densest_text(view.densest_second)),
            (
                "below target",
                ", ".join(bucket_label(b.low, b.high) for b in bad) + " tokens"
                if bad
                else "no input-length bucket",
            ),
        ]
    )


def bucket_rows(view: ScheduleView) -> list[list[str]]:
    """Each bucket's cells, as ``BUCKET_HEAD`` names them."""
    return [
        [
            bucket_label(b.low, b.high),
            f"[{b.low}, {b.high})",
            str(b.requests),
            str(b.good),
            f"{b.attainment:.3f}",
            f"{b.interval.low:.3f} to {b.interval.high:.3f}",
        ]
        for b in view.buckets
    ]


def run_timeline(run: TrialRun, view: ScheduleView) -> Markup:
    """The per-request timeline up to ``EACH_MAX`` offers, else the binned one, with its caption."""
    pace = pace_text(view)
    if len(run.records) <= EACH_MAX:
        return figure(timeline_figure(run, pace), TIMELINE_CAPTION)
    bins = timeline_bins(run.records)
    names = ", ".join(name for name, _ in OUTCOMES)
    return figure(
        binned_timeline_figure(run, bins, pace),
        f"Binned timeline ({len(run.records)} offers, more than {EACH_MAX}: aggregated in "
        f"{bins.count} bins of {bins.width_s:g} s). Per bin of due time: the offers by outcome "
        f"({names}) stacked; the TTFT p50 and p99 of its completed requests against the SLO; the "
        "worst lag of its offers against the limit; and the most requests in flight at any time "
        "in the bin, against the cap. Gaps: bins with no completed request.",
    )


def schedule_part(run: TrialRun, view: ScheduleView, index: int) -> Markup:
    """The scheduled workload's part of trial ``index``'s section (call inside
    :func:`_svg.plotting`)."""
    name = run.path.name
    target = float(Decimal(run.summary.attainment_target))
    return tag(
        "div",
        join(
            [
                tag(
                    "h4",
                    f"Scheduled workload: {view.source} at speedup {view.speedup:g}x",
                    id=slug("schedule", index, name),
                ),
                _facts(run, view),
                figure(
                    offered_figure(view, name),
                    f"The offered load: requests (top) and prompt and output tokens (below, "
                    f"stacked) falling due per second, in bins of {view.offered.bin_s:g} s over "
                    f"the schedule's {view.span_s:.1f} s (after the speedup); dashed, the span's "
                    "means.",
                ),
                figure(
                    lengths_figure(view, name),
                    "The requests' input and output lengths, in power-of-two buckets "
                    "[low, high) of tokens.",
                ),
                figure(
                    buckets_figure(view.buckets, target, name),
                    "Attainment (good over requests) of each input-length bucket holding a "
                    "request, with its 95% Wilson interval, against the target; red below it.",
                ),
                table(BUCKET_HEAD, bucket_rows(view)),
                tag("h4", "Timeline"),
                run_timeline(run, view),
            ]
        ),
        class_="schedule-view",
    )


__all__ = ["EACH_MAX", "bucket_rows", "densest_text", "run_timeline", "schedule_part"]
