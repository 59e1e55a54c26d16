"""A trial run's server view (``server.json`` and ``summary.json``'s ``server``): the client's TTFT
beside the server's, the per-engine split with the fleet's counts and the comparison's warnings,
and with spans each request's queue, prefill and decode time and the span join's numbers."""

from __future__ import annotations

from narwhal_report._html import Markup, facts, figure, join, ms, pct, table, tag, warnings
from narwhal_report._server_figures import (
    ServerTtft,
    bin_width,
    breakdown_figure,
    matched,
    server_ttft,
    ttft_figure,
)
from narwhal_trial import (
    EngineView,
    HistogramView,
    QuantileInterval,
    ServerDoc,
    ServerView,
    SpanView,
    TrialRun,
    TtftGap,
)

ENGINE_HEAD = (
    "engine", "role", "read", "completed", "aborted", "share", "TTFT mean", "TTFT p50", "TTFT p99",
    "queue mean", "prefill mean", "decode mean", "client-added TTFT (spans, median)",
)  # fmt: skip
FLEET_HEAD = (
    "fleet", "pages", "client completed", "server completed (serving engines)",
    "prefill completed", "server TTFT from",
)  # fmt: skip


def interval_ms(q: QuantileInterval | None) -> str:
    """A quantile's interval in ms: ``(40.0, 60.0] ms``; ``> 2560.0 ms`` above the last bound."""
    if q is None or (q.low is None and q.high is None):
        return "n/a"
    if q.high is None:
        return f"> {(q.low or 0.0) * 1000:.1f} ms"
    if q.low is None:
        return f"≤ {q.high * 1000:.1f} ms"
    return f"({q.low * 1000:.1f}, {q.high * 1000:.1f}] ms"


def _count(value: int | None) -> str:
    return "n/a" if value is None else str(value)


def _mean(h: HistogramView | None) -> str:
    return "n/a" if h is None else ms(h.mean_s)


def engine_row(e: EngineView) -> list[str]:
    """One engine's cells, as ``ENGINE_HEAD`` names them."""
    ttft = e.ttft
    return [
        e.name,
        e.role or "none",
        "yes" if e.read else "no",
        _count(e.completed),
        _count(e.aborted),
        pct(e.share),
        _mean(ttft),
        "n/a" if ttft is None else interval_ms(ttft.p50_s),
        "n/a" if ttft is None else interval_ms(ttft.p99_s),
        _mean(e.queue),
        _mean(e.prefill),
        _mean(e.decode),
        ms(e.client_added_ttft_s),
    ]


def fleet_row(view: ServerView) -> list[str]:
    """The fleet's cells, as ``FLEET_HEAD`` names them."""
    f = view.fleet
    pages = f"{view.pages} read"
    if view.missing_pages:
        pages += f"; not read: {', '.join(view.missing_pages)}"
    method = f.ttft_method or "n/a (a page or a TTFT histogram missing)"
    return ["fleet", pages, str(f.client_completed), _count(f.server_completed),
            "none (no prefill engine)" if f.prefill_completed is None else
            str(f.prefill_completed), method]  # fmt: skip


def gap_text(gap: TtftGap | None, method: str | None) -> str:
    """The fleet's TTFT gap in a sentence (its means are exact, its quantiles intervals)."""
    if gap is None:
        return "No TTFT gap: a page or a TTFT histogram is missing."
    return (
        f"Fleet TTFT ({method}): client mean {ms(gap.client_mean_s)}, server mean "
        f"{ms(gap.server_mean_s)}, client-added mean {ms(gap.added_mean_s)} "
        f"({gap.gap_fraction:.1%} of the client's, {gap.grade}); p50 client "
        f"{ms(gap.client_p50_s)}, server {interval_ms(gap.server_p50_s)}; p99 client "
        f"{ms(gap.client_p99_s)}, server {interval_ms(gap.server_p99_s)}."
    )


def _ttft_caption(server: ServerTtft, view: ServerView | None) -> str:
    text = "Client TTFT of every completed request (left) beside the server's own TTFT (right, "
    if server.exact:
        text += f"exact per request: the {len(server.exact)} requests matched to their span)."
    elif server.histogram is not None:
        h = server.histogram
        above = h.counts[-1] if h.counts else 0
        text += (
            f"{server.note}): the histogram only knows the bucket bounds, so its CDF is drawn as "
            "a step at each bound (the dots) with every observation at its bucket's upper bound; "
            "the true curve lies on or above the steps between the bounds."
        )
        if above and h.bounds:
            text += f" {above} observation(s) above the last bound ({ms(h.bounds[-1])})."
    else:
        text += f"none drawn: {server.note})."
    text += " The dashed lines are the SLO bound, the dotted ones the means."
    if view is not None:
        text += " " + gap_text(view.fleet.ttft, view.fleet.ttft_method)
    return text


def _added(a: dict[str, float | int | None], key: str) -> str:
    value = a.get(key)
    return ms(None if value is None else float(value))


def span_rows(spans: SpanView, doc: ServerDoc | None) -> list[tuple[str, object]]:
    """The span join's numbers (and the receiver's, from ``server.json``)."""
    a = spans.added_ttft_s

    def first(ids: list[str]) -> str:
        return f" (first: {', '.join(ids[:3])})" if ids else ""

    rows: list[tuple[str, object]] = [
        ("matched", f"{spans.matched} of {spans.client_completed} completed requests"),
        ("client only",
         f"{spans.client_only} completed without a span{first(spans.client_only_ids)}"),
        ("server only", f"{spans.server_only} span(s) of no record{first(spans.server_only_ids)}"),
        ("warm-up spans", str(spans.warmup_spans)),
        (
            "client-added TTFT",
            f"p50 {_added(a, 'p50')} · p99 {_added(a, 'p99')} · max {_added(a, 'max')} "
            f"(mean {_added(a, 'mean')}, min {_added(a, 'min')})",
        ),
        ("below zero", f"{spans.negative} request(s) whose client TTFT is below the server's"),
        ("by engine", ", ".join(f"{k} {v}" for k, v in spans.by_engine.items()) or "none"),
    ]  # fmt: skip
    receiver = None if doc is None else doc.receiver
    if receiver is not None:
        rows.append((
            "receiver",
            f"{receiver.address}: {receiver.exports} export(s) ({receiver.rejected} rejected), "
            f"{receiver.spans} span(s) kept, {receiver.other_spans} other(s); waited "
            f"{receiver.waited_s:.2f} s",
        ))  # fmt: skip
    return rows


def server_view(run: TrialRun) -> Markup:
    """The server's view of ``run`` (empty when the run has neither ``server.json`` nor a summary
    ``server``); call inside :func:`_svg.plotting`."""
    view, doc = run.summary.server, run.server
    if view is None and doc is None:
        return Markup("")
    rows = matched(run)
    ttft = server_ttft(run, rows)
    gap = None if view is None else view.fleet.ttft
    means = None if gap is None else (gap.client_mean_s, gap.server_mean_s)
    parts = [
        tag("h4", "Server's view: client and server TTFT"),
        figure(ttft_figure(run, ttft, means), _ttft_caption(ttft, view)),
        tag("h4", "Server's view: per engine"),
    ]
    if view is None:
        parts.append(tag("p", "summary.json holds no server view.", class_="sub"))
    else:
        parts += [
            table(ENGINE_HEAD, [engine_row(e) for e in view.engines]),
            table(FLEET_HEAD, [fleet_row(view)]),
            warnings(view.warnings),
        ]
    spans = None if view is None else view.spans
    if rows or spans is not None:
        parts.append(tag("h4", "Server's view: queue, prefill and decode (spans)"))
    if rows:
        width = bin_width(rows)
        each = (
            "each request"
            if width == 1
            else f"the mean of the matched requests in each bin of {width} sequence numbers"
        )
        parts.append(
            figure(
                breakdown_figure(rows, run.path.name),
                f"The engine's queue, prefill and decode time and the client-added TTFT (below "
                f"zero drawn as zero) stacked, for {each}; below, the client-added TTFT on its "
                "own scale"
                + (" (median and range per bin)" if width > 1 else "")
                + ". Gaps are requests without a span (errors, misses, spans not received).",
            )
        )
    if spans is not None:
        parts.append(facts(span_rows(spans, doc)))
    return tag("div", join(parts), class_="server-view")


__all__ = ["engine_row", "fleet_row", "interval_ms", "server_view"]
