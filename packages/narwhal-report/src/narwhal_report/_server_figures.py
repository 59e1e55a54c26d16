"""The server's view of a trial drawn: the client's TTFT beside the server's (exact per request from
spans, or the step function the fleet's merged TTFT histogram allows), and each matched request's
queue, prefill, client-added and decode time over the request sequence (spans)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal
from itertools import accumulate
from typing import Any, Final

from narwhal_report import _svg
from narwhal_report._html import ms
from narwhal_trial import HistogramDelta, ServerDoc, ServerTiming, TrialRun

TTFT_FAMILY: Final = "vllm:time_to_first_token_seconds"
EACH_MAX: Final = 250
"""Up to this many matched requests the breakdown draws one step per request; beyond, bins."""
BINS: Final = 100
"""Bins of consecutive sequence numbers the breakdown aggregates a larger run into."""
PARTS: Final = (
    ("queue", _svg.SLOW),
    ("prefill", _svg.BLUE),
    ("client-added TTFT", _svg.ERROR),
    ("decode", _svg.SKY),
)


@dataclass(frozen=True, slots=True)
class ServerTtft:
    """What the server's TTFT distribution is drawn from: every matched request's (spans), else a
    merged histogram; ``note`` says which, or why there is none."""

    exact: list[float]
    histogram: HistogramDelta | None
    note: str


def matched(run: TrialRun) -> list[tuple[int, ServerTiming]]:
    """(sequence, server timings) of every completed record matched to its span, in order."""
    return [
        (r.sequence, r.server)
        for r in run.records
        if r.status == "completed" and r.server is not None
    ]


def merged_ttft(doc: ServerDoc) -> tuple[HistogramDelta | None, str]:
    """The serving engines' (kind engine, role decode, mixed or none) TTFT histograms added bucket
    by bucket, and how they were found; None when they cannot be merged (a split fleet, no
    histogram, different bounds)."""
    engines = [p for p in doc.pages if p.kind == "engine"]
    if any(p.role == "prefill" for p in engines):
        return None, (
            "a split fleet: its server TTFT is the prefill engines' e2e plus the serving "
            "engines' TTFT, whose distribution only spans give"
        )
    have: list[HistogramDelta] = []
    lacking: list[str] = []
    for page in engines:
        h = page.histograms.get(TTFT_FAMILY)
        usable = page.before.ok and page.after.ok and page.restarted is not True
        if h is None or not usable or len(h.counts) != len(h.bounds) + 1:
            lacking.append(page.name)
        else:
            have.append(h)
    if not have:
        return None, "no engine page has a usable TTFT histogram"
    if any(h.bounds != have[0].bounds for h in have):
        return None, "the engines' TTFT histograms have different bucket bounds"
    merged = HistogramDelta(
        bounds=list(have[0].bounds),
        counts=[sum(c) for c in zip(*(h.counts for h in have), strict=True)],
        count=sum(h.count for h in have),
        sum=math.fsum(h.sum for h in have),
    )
    note = f"the TTFT histograms of {len(have)} serving engine(s) merged"
    if lacking:
        note += f" ({', '.join(lacking)} not read: left out)"
    return merged, note


def server_ttft(run: TrialRun, rows: list[tuple[int, ServerTiming]]) -> ServerTtft:
    """Spans when any record has them, else the merged histogram of ``server.json``."""
    if rows:
        return ServerTtft([t.ttft_s for _, t in rows], None, "spans")
    if run.server is None:
        return ServerTtft([], None, "no server.json in the run folder")
    histogram, note = merged_ttft(run.server)
    return ServerTtft([], histogram, note)


def histogram_cdf(h: HistogramDelta) -> tuple[list[float], list[float]]:
    """The CDF a histogram allows, known only at its bounds: (0, 0), then (bound, fraction of the
    observations at or below it) for each finite bound (seconds; nothing when it is empty)."""
    total = sum(h.counts)
    if total <= 0:
        return [], []
    below = accumulate(h.counts[: len(h.bounds)])
    return [0.0, *h.bounds], [0.0, *(c / total for c in below)]


def _exact(ax: Any, values: list[float], colour: str, label: str, **kw: Any) -> None:
    import numpy as np

    xs = np.sort(np.asarray(values)) * 1000
    ys = np.arange(1, len(xs) + 1) / len(xs)
    ax.step(xs, ys, where="post", color=colour, label=label, **kw)


def _histogram(ax: Any, h: HistogramDelta, x_max_ms: float) -> None:
    xs, ys = histogram_cdf(h)
    if not xs:
        ax.text(0.5, 0.5, "the merged histogram is empty", transform=ax.transAxes, ha="center")
        return
    full = next((k for k, y in enumerate(ys) if y >= ys[-1]), len(ys) - 1)
    shown = [(x * 1000, y) for x, y in zip(xs[: full + 1], ys[: full + 1], strict=True)]
    pts = [p for p in shown if p[0] <= x_max_ms] or shown[:1]
    px = [x for x, _ in pts] + [max(x_max_ms, pts[-1][0])]
    py = [y for _, y in pts] + [pts[-1][1]]
    label = f"merged histogram, {sum(h.counts)} observations (steps at bucket bounds)"
    ax.step(px, py, where="post", color=_svg.SLOW, label=label)
    ax.plot(px[1:-1], py[1:-1], "o", color=_svg.SLOW, markersize=3)


def _x_max_ms(client: list[float], server: ServerTtft, slo_s: float) -> tuple[float, bool]:
    """The x axis' end (ms): the data's (the histogram's last bucket with observations), or the
    SLO bound's when it is at most twice that; and whether the SLO bound is on the scale."""
    tops = [*client[-1:], *server.exact]
    h = server.histogram
    if h is not None and h.bounds and sum(h.counts):
        last = max(k for k, c in enumerate(h.counts) if c)
        tops.append(h.bounds[min(last, len(h.bounds) - 1)])
    top = max(tops, default=slo_s)
    on_scale = slo_s <= 2 * top
    return max(top, slo_s if on_scale else 0.0) * 1000 * 1.05, on_scale


def ttft_figure(run: TrialRun, server: ServerTtft, means: tuple[float, float] | None) -> str:
    """Client TTFT (left) and the server's (right) as CDFs on one scale, the SLO dashed (named off
    scale when it lies beyond twice the data) and the means (``means``: client, server; seconds)
    dotted."""
    fig, axes = _svg.new_figure(1, 2, size=(9.0, 3.0), sharex=True, sharey=True)
    client_ax, server_ax = axes[0][0], axes[0][1]
    client = sorted(
        r.ttft_s for r in run.records if r.status == "completed" and r.ttft_s is not None
    )
    slo = Decimal(run.manifest.ttft_s)
    x_max, slo_shown = _x_max_ms(client, server, float(slo))
    if client:
        _exact(client_ax, client, _svg.BLUE, f"{len(client)} completed")
        _exact(server_ax, client, _svg.GREY, "client", alpha=0.6, linewidth=0.9)
    else:
        client_ax.text(0.5, 0.5, "no completed request", transform=client_ax.transAxes,
                       ha="center")  # fmt: skip
    if server.exact:
        _exact(server_ax, server.exact, _svg.SLOW, f"{len(server.exact)} with a span (exact)")
    elif server.histogram is not None:
        _histogram(server_ax, server.histogram, x_max)
    else:
        server_ax.text(0.5, 0.55, "no server TTFT distribution", transform=server_ax.transAxes,
                       ha="center")  # fmt: skip
    panels = ((client_ax, "client TTFT", 0, "lower right"), (server_ax, "server TTFT", 1, "best"))
    for ax, title, mean, where in panels:
        if slo_shown:
            ax.axvline(float(slo) * 1000, color=_svg.ERROR, linestyle="--", label=f"SLO {slo} s")
        else:
            ax.plot([], [], color=_svg.ERROR, linestyle="--", label=f"SLO {slo} s (off scale)")
        if means is not None:
            label = f"mean {ms(means[mean])}"
            ax.axvline(means[mean] * 1000, color=_svg.INK, linestyle=":", label=label)
        ax.set_title(title)
        ax.set_xlabel("TTFT (ms)")
        ax.legend(loc=where, fontsize=7)
    client_ax.set_ylabel("fraction ≤ x")
    client_ax.set_ylim(0, 1.02)
    client_ax.set_xlim(0, x_max)
    return _svg.to_svg(fig, f"client and server TTFT of {run.path.name}")


def bin_width(rows: list[tuple[int, ServerTiming]]) -> int:
    """Sequence numbers per point of the breakdown: 1 up to EACH_MAX matched requests."""
    if len(rows) <= EACH_MAX:
        return 1
    span = rows[-1][0] - rows[0][0] + 1
    return max(1, math.ceil(span / BINS))


def _parts_ms(t: ServerTiming) -> list[float]:
    values = (t.queue_s, t.prefill_s, max(t.client_added_ttft_s, 0.0), t.decode_s)
    return [0.0 if v is None else v * 1000 for v in values]


def breakdown_figure(rows: list[tuple[int, ServerTiming]], name: str) -> str:
    """Queue, prefill, client-added TTFT (below zero drawn as zero) and decode stacked over the
    request sequence, and the client-added TTFT on its own scale below; per request up to
    EACH_MAX matched requests, else the mean (and the added TTFT's median and range) per bin of
    ``bin_width`` sequence numbers. Call with ``rows`` not empty."""
    import numpy as np

    width = bin_width(rows)
    first = rows[0][0]
    n_points = (rows[-1][0] - first) // width + 1
    stacks = np.full((n_points, len(PARTS)), np.nan)
    added = np.full((n_points, 3), np.nan)  # median, low, high (ms)
    groups: dict[int, list[ServerTiming]] = {}
    for seq, timing in rows:
        groups.setdefault((seq - first) // width, []).append(timing)
    for k, group in groups.items():
        stacks[k] = np.mean([_parts_ms(t) for t in group], axis=0)
        values = [t.client_added_ttft_s * 1000 for t in group]
        added[k] = (float(np.median(values)), min(values), max(values))
    xs = first + np.arange(n_points) * width + (width - 1) / 2
    fig, axes = _svg.new_figure(
        2, 1, size=(9.0, 4.6), sharex=True, gridspec_kw={"height_ratios": [3, 1.4]}
    )
    stack_ax, added_ax = axes[0][0], axes[1][0]
    lower = np.zeros(n_points)
    for k, (part, colour) in enumerate(PARTS):
        upper = lower + stacks[:, k]
        stack_ax.fill_between(xs, lower, upper, step="mid", color=colour, linewidth=0,
                              label=part)  # fmt: skip
        lower = upper
    what = "per request" if width == 1 else f"mean per {width} requests"
    stack_ax.set_title(f"{name}: server time of {len(rows)} matched requests, {what}")
    stack_ax.set_ylabel("ms")
    stack_ax.set_ylim(0, max(float(np.nanmax(lower)), 1e-3) * 1.22)  # room for the legend
    stack_ax.legend(loc="upper left", ncols=4, fontsize=7)
    if width == 1:
        added_ax.plot(xs, added[:, 0], ".", color=_svg.ERROR, markersize=3)
    else:
        added_ax.fill_between(xs, added[:, 1], added[:, 2], step="mid", color=_svg.ERROR,
                              alpha=0.25, linewidth=0, label="range")  # fmt: skip
        added_ax.step(xs, added[:, 0], where="mid", color=_svg.ERROR, label="median")
        low, high = float(np.nanmin(added[:, 1])), float(np.nanmax(added[:, 2]))
        added_ax.set_ylim(min(low, 0.0), max(high, 0.0) + (high - min(low, 0.0)) * 0.45 + 1e-3)
        added_ax.legend(loc="upper left", ncols=2, fontsize=7)
    added_ax.axhline(0, color=_svg.INK, linewidth=0.6)
    added_ax.set_ylabel("client-added\nTTFT (ms)")
    added_ax.set_xlabel("request (sequence number)")
    _svg.integer_ticks(added_ax.xaxis)
    return _svg.to_svg(fig, f"queue, prefill and decode per request of {name}")


__all__ = [
    "ServerTtft",
    "bin_width",
    "breakdown_figure",
    "histogram_cdf",
    "matched",
    "merged_ttft",
    "server_ttft",
    "ttft_figure",
]
