"""The per-request timeline of a trial run: each offer's due time, send and stream lifetime
coloured by status, the client's lag and the requests in flight over time."""

from __future__ import annotations

from typing import Final

from narwhal_report import _svg
from narwhal_trial import RequestRecord, TrialRun

TIMELINE_CAPTION = (
    "Each offer: due (tick), sent (dot) and its lifetime to the end of its stream, coloured by "
    "status; the client's lag (sent - due) and the requests in flight over time, against the "
    "client's limits."
)
"""The per-request timeline's caption."""
ERRORS = frozenset(
    {"http_error", "stream_error", "stream_cut", "timeout", "connect_error", "protocol_error"}
)


OUTCOMES: Final = (
    ("good", _svg.GOOD),
    ("completed, too slow", _svg.SLOW),
    ("error", _svg.ERROR),
    ("schedule miss", _svg.MISS),
    ("other", _svg.GREY),
)
"""Each record's outcome and its colour, in the legends' order."""
_COLOUR: Final = dict(OUTCOMES)


def outcome(record: RequestRecord) -> str:
    """The record's outcome, one of ``OUTCOMES``' names."""
    if record.good:
        return "good"
    if record.status == "completed":
        return "completed, too slow"
    if record.status == "client_schedule_miss":
        return "schedule miss"
    return "error" if record.status in ERRORS else "other"


def status_colour(record: RequestRecord) -> str:
    """Green good, amber completed but too slow, purple schedule miss, red errors, grey else."""
    return _COLOUR[outcome(record)]


def in_flight_steps(records: list[RequestRecord]) -> tuple[list[float], list[int]]:
    """Requests in flight over time: (times, counts) of a step function (sent +1, end -1)."""
    events: list[tuple[float, int]] = []
    for r in records:
        if r.sent_s is not None:
            events.append((r.sent_s, 1))
            events.append((r.end_s if r.end_s is not None else r.sent_s, -1))
    events.sort(key=lambda e: (e[0], e[1]))
    times, counts, level = [0.0], [0], 0
    for t, step in events:
        level += step
        times.append(t)
        counts.append(level)
    return times, counts


def timeline_figure(run: TrialRun, pace: str | None = None) -> str:
    """Per request due/sent/end coloured by status; lag; in flight over time (``pace``: how the
    offers came, for the title; default ``at RATE/s``)."""
    records = run.records
    limits = run.manifest.limits
    fig, axes = _svg.new_figure(
        3, 1, size=(9.0, 6.2), sharex=True, gridspec_kw={"height_ratios": [3, 1.2, 1.2]}
    )
    lanes, lag_ax, flight_ax = axes[0][0], axes[1][0], axes[2][0]
    colours = [status_colour(r) for r in records]
    lived = [r for r in records if r.sent_s is not None and r.end_s is not None]
    lanes.hlines(
        [r.sequence for r in lived],
        [r.sent_s or 0.0 for r in lived],
        [r.end_s or 0.0 for r in lived],
        colors=[status_colour(r) for r in lived],
        linewidth=1.2,
    )
    lanes.scatter(
        [r.due_s for r in records],
        [r.sequence for r in records],
        marker="|",
        s=14,
        color=_svg.GREY,
        linewidths=0.8,
        label="due",
    )
    sent = [r for r in records if r.sent_s is not None]
    lanes.scatter(
        [r.sent_s for r in sent],
        [r.sequence for r in sent],
        s=6,
        color=[status_colour(r) for r in sent],
        zorder=3,
        label="sent",
    )
    for name, colour in OUTCOMES[:4]:
        lanes.plot([], [], color=colour, linewidth=3, label=name)
    lanes.set_ylabel("request")
    _svg.integer_ticks(lanes.yaxis)
    _svg.integer_ticks(flight_ax.yaxis)
    lanes.invert_yaxis()
    pace = f"at {run.manifest.rate:g}/s" if pace is None else pace
    lanes.set_title(f"{run.path.name}: {len(records)} offers {pace}")
    lanes.legend(loc="upper right", ncols=3, fontsize=7)
    lag_ax.scatter(
        [r.due_s for r in records], [r.lag_s * 1000 for r in records], s=6, color=colours
    )
    lag_ax.axhline(
        limits.max_lag_s * 1000,
        color=_svg.ERROR,
        linestyle="--",
        label=f"max lag {limits.max_lag_s * 1000:g} ms",
    )
    lag_ax.set_ylabel("lag (ms)")
    lag_ax.legend(loc="upper right")
    times, counts = in_flight_steps(records)
    flight_ax.step(times, counts, where="post", color=_svg.BLUE)
    top = max(max(counts) * 1.15, 1)
    if limits.max_in_flight <= top * 2:
        flight_ax.axhline(
            limits.max_in_flight,
            color=_svg.ERROR,
            linestyle="--",
            label=f"cap {limits.max_in_flight}",
        )
        top = max(top, limits.max_in_flight * 1.1)
    else:
        flight_ax.plot(
            [],
            [],
            color=_svg.ERROR,
            linestyle="--",
            label=f"cap {limits.max_in_flight} (off scale)",
        )
    flight_ax.set_ylim(0, top)
    flight_ax.set_ylabel("in flight")
    flight_ax.set_xlabel("time since t0 (s)")
    flight_ax.legend(loc="upper right")
    return _svg.to_svg(fig, f"timeline of {run.path.name}")


__all__ = [
    "ERRORS",
    "OUTCOMES",
    "TIMELINE_CAPTION",
    "in_flight_steps",
    "outcome",
    "status_colour",
    "timeline_figure",
]
