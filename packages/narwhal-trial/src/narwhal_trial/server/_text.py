"""The server view's lines on screen after a run (``run``'s stdout)."""

from __future__ import annotations

from narwhal_trial.documents._server import HistogramView, QuantileInterval, ServerView


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 1000:.1f} ms"


def interval_text(q: QuantileInterval | None) -> str:
    """A quantile's interval in ms: ``(40.0, 60.0] ms``, ``> 2560.0 ms``, ``< 3.0 ms``."""
    if q is None:
        return "n/a"
    if q.high is None:
        return "n/a" if q.low is None else f"> {q.low * 1000:.1f} ms"
    if q.low is None:
        return f"< {q.high * 1000:.1f} ms"
    return f"({q.low * 1000:.1f}, {q.high * 1000:.1f}] ms"


def _hist(name: str, h: HistogramView | None) -> str:
    if h is None or not h.count:
        return f"{name} n/a"
    return f"{name} mean {_ms(h.mean_s)} p50 {interval_text(h.p50_s)}"


def server_lines(view: ServerView) -> list[str]:
    """What the client saw against what the engines counted, a few lines."""
    fleet = view.fleet
    served = "n/a" if fleet.server_completed is None else str(fleet.server_completed)
    lines = [
        f"server: {view.pages} page(s) read"
        + (f", not read: {', '.join(view.missing_pages)}" if view.missing_pages else "")
        + f"; engines finished {served} (client completed {fleet.client_completed})"
        + ("" if fleet.prefill_completed is None else f", prefilled {fleet.prefill_completed}")
    ]
    gap = fleet.ttft
    if gap is not None:
        lines.append(
            f"  TTFT mean client {_ms(gap.client_mean_s)}, server {_ms(gap.server_mean_s)} "
            f"({fleet.ttft_method}): client-added {_ms(gap.added_mean_s)} "
            f"({gap.gap_fraction * 100:.1f} %, {gap.grade}); client-added p50 "
            f"{interval_text(gap.added_p50_s)}, p99 {interval_text(gap.added_p99_s)}"
        )
    for e in view.engines:
        share = "" if e.share is None else f" ({e.share * 100:.0f} %)"
        done = "not read" if e.completed is None else f"{e.completed} finished{share}"
        added = (
            ""
            if e.client_added_ttft_s is None
            else f", client-added TTFT median {_ms(e.client_added_ttft_s)}"
        )
        lines.append(
            f"  {e.name} ({e.role or 'engine'}): {done}; {_hist('TTFT', e.ttft)}; "
            f"{_hist('queue', e.queue)}{added}"
        )
    spans = view.spans
    if spans is not None:
        a = spans.added_ttft_s
        lines.append(
            f"spans: {spans.matched} of {spans.client_completed} completed requests matched "
            f"({spans.client_only} without a span, {spans.server_only} spans without a record); "
            f"client-added TTFT p50 {_ms(_f(a.get('p50')))} p99 {_ms(_f(a.get('p99')))} max "
            f"{_ms(_f(a.get('max')))}; {spans.negative} below zero"
        )
    lines.extend(f"warning: {w}" for w in view.warnings)
    return lines


def _f(value: float | int | None) -> float | None:
    return None if value is None else float(value)
