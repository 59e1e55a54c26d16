"""Per trial run: the verdict, TTFT and TPOT CDFs with the SLO lines, attainment with its interval
against the target, a timeline of due, sent and lag per request with in-flight over time and status
colours, the server's view when the run has one (``_server_section``), the client's saturation
evidence and the manifest's provenance."""

from __future__ import annotations

from decimal import Decimal

from narwhal_report import _svg
from narwhal_report._html import Section, badge, facts, figure, join, ms, slug, tag
from narwhal_report._server_section import server_view
from narwhal_trial import RequestRecord, TrialRun

ERRORS = frozenset(
    {"http_error", "stream_error", "stream_cut", "timeout", "connect_error", "protocol_error"}
)


def status_colour(record: RequestRecord) -> str:
    """Green good, amber completed but too slow, purple schedule miss, red errors, grey else."""
    if record.good:
        return _svg.GOOD
    if record.status == "completed":
        return _svg.SLOW
    if record.status == "client_schedule_miss":
        return _svg.MISS
    return _svg.ERROR if record.status in ERRORS else _svg.GREY


def trial_section(run: TrialRun, index: int) -> Section:
    """The whole section of one run."""
    m, s = run.manifest, run.summary
    title = f"Trial {m.rate:g} request/s: {run.path.name}"
    verdict = facts(
        [
            ("verdict", join([badge(s.passed), tag("span", f" exit code {s.exit_code}")])),
            (
                "good",
                f"{s.good} of {s.requests} (need {s.required_good}, target {s.attainment_target})",
            ),
            (
                "attainment",
                f"{s.attainment:.3f} (95% Wilson interval {s.attainment_interval.low:.3f}"
                f" to {s.attainment_interval.high:.3f})",
            ),
            (
                "SLO",
                f"TTFT ≤ {m.ttft_s} s, TPOT ≤ {m.tpot_s} s; {m.input_tokens} in / "
                f"{m.output_tokens} out",
            ),
            ("client schedule", badge(s.client_schedule_valid, "VALID", "INVALID")),
            ("statuses", ", ".join(f"{k} {v}" for k, v in s.counts.items() if v) or "none"),
            (
                "TTFT",
                f"p50 {ms(s.ttft_s.p50)} · p90 {ms(s.ttft_s.p90)} · p99 {ms(s.ttft_s.p99)} · "
                f"max {ms(s.ttft_s.max)}",
            ),
            (
                "TPOT",
                f"p50 {ms(s.tpot_s.p50)} · p90 {ms(s.tpot_s.p90)} · p99 {ms(s.tpot_s.p99)} · "
                f"max {ms(s.tpot_s.max)}",
            ),
            *([("error", s.error)] if s.error else []),
        ]
    )
    body = join(
        [
            verdict,
            figure(
                cdf_figure(run),
                "TTFT and TPOT of every completed request as cumulative "
                "distributions; the dashed lines are the SLO bounds.",
            ),
            figure(
                attainment_figure(run),
                "Good requests over all offers with the 95% Wilson "
                "interval, against the target attainment.",
            ),
            figure(
                timeline_figure(run),
                "Each offer: due (tick), sent (dot) and its lifetime to "
                "the end of its stream, coloured by status; the client's lag (sent - due) and the "
                "requests in flight over time, against the client's limits.",
            ),
            server_view(run),
            tag("h4", "Client saturation evidence"),
            facts(_client_rows(run)),
            tag("h4", "Provenance (manifest)"),
            facts(_provenance_rows(run)),
        ]
    )
    return Section(slug("trial", index, run.path.name), title, body)


def _client_rows(run: TrialRun) -> list[tuple[str, object]]:
    s, limits, c = run.summary, run.manifest.limits, run.summary.client
    misses = s.schedule_misses
    return [
        (
            "schedule misses",
            f"in-flight cap {misses.get('in_flight_cap', 0)}, lag {misses.get('lag', 0)}",
        ),
        ("max lag", f"{ms(s.max_lag_s)} (limit {ms(limits.max_lag_s)})"),
        ("max in flight", f"{s.max_in_flight} (limit {limits.max_in_flight})"),
        (
            "scheduling lag",
            f"p50 {ms(c.scheduling_lag_s.p50)} · p99 {ms(c.scheduling_lag_s.p99)} · "
            f"max {ms(c.scheduling_lag_s.max)}",
        ),
        (
            "event-loop lag",
            f"p50 {ms(c.event_loop_lag_s.p50)} · p99 {ms(c.event_loop_lag_s.p99)}"
            f" · max {ms(c.event_loop_lag_s.max)}",
        ),
        (
            "client CPU",
            f"user {c.cpu_user_s:.2f} s, system {c.cpu_system_s:.2f} s"
            + (
                ""
                if c.cpu_per_sent_request_s is None
                else f", {c.cpu_per_sent_request_s * 1000:.2f} ms per sent request"
            ),
        ),
        ("peak memory", f"{c.peak_rss_bytes / 2**20:.1f} MiB"),
        ("bytes", f"sent {c.bytes_sent:,}, received {c.bytes_received:,}"),
        (
            "rate",
            f"offered {s.offered_rate:g}/s, achieved "
            + ("n/a" if s.achieved_rate is None else f"{s.achieved_rate:.3f}/s"),
        ),
        ("transport", f"{limits.stream_transport}, {c.preconnected} preconnected"),
    ]


def _provenance_rows(run: TrialRun) -> list[tuple[str, object]]:
    m = run.manifest
    dirty = {None: "unknown", True: "dirty", False: "clean"}[m.source_dirty]
    return [
        ("run id", m.run_id),
        ("started", m.start_time),
        ("base URL", m.base_url),
        ("model", m.model),
        ("workload", f"{m.workload_path} (SHA-256 {m.workload_digest})"),
        ("helper", f"narwhal-trial {m.helper_version}, digest {m.helper_digest}"),
        ("source", f"{m.source_revision} ({dirty})"),
        ("host", f"{m.hostname} · {m.python_version} · httpx {m.httpx_version} · {m.event_loop}"),
        ("drain", f"{m.limits.drain_preset or 'gauges'}: {', '.join(m.limits.drain_gauges)}"),
        ("command", " ".join(m.command)),
        ("run folder", str(run.path)),
    ]


def _cdf(ax: object, values: list[float], bound: Decimal, what: str) -> None:
    import numpy as np
    from matplotlib.axes import Axes

    assert isinstance(ax, Axes)
    if values:
        xs = np.sort(np.asarray(values)) * 1000
        ys = np.arange(1, len(xs) + 1) / len(xs)
        ax.step(xs, ys, where="post", color=_svg.BLUE, label=f"{len(xs)} completed")
    else:
        ax.text(0.5, 0.5, "no completed request", transform=ax.transAxes, ha="center")
    ax.axvline(float(bound) * 1000, color=_svg.ERROR, linestyle="--", label=f"SLO {bound} s")
    ax.set_xlabel(f"{what} (ms)")
    ax.set_ylabel("fraction ≤ x")
    ax.set_ylim(0, 1.02)
    ax.set_xlim(left=0)
    ax.set_title(what)
    ax.legend(loc="lower right")


def cdf_figure(run: TrialRun) -> str:
    """TTFT and TPOT CDFs side by side, SLO bounds as dashed lines."""
    fig, axes = _svg.new_figure(1, 2, size=(9.0, 3.0))
    done = [r for r in run.records if r.status == "completed"]
    _cdf(
        axes[0][0],
        [r.ttft_s for r in done if r.ttft_s is not None],
        Decimal(run.manifest.ttft_s),
        "TTFT",
    )
    _cdf(
        axes[0][1],
        [r.tpot_s for r in done if r.tpot_s is not None],
        Decimal(run.manifest.tpot_s),
        "TPOT",
    )
    return _svg.to_svg(fig, f"TTFT and TPOT distributions of {run.path.name}")


def attainment_figure(run: TrialRun) -> str:
    """Attainment as a point with its interval on a 0..1 axis, the target as a line."""
    s = run.summary
    fig, axes = _svg.new_figure(1, 1, size=(9.0, 1.3))
    ax = axes[0][0]
    target = float(Decimal(s.attainment_target))
    colour = _svg.GOOD if s.passed else _svg.ERROR
    ax.errorbar(
        [s.attainment],
        [0],
        xerr=[
            [s.attainment - s.attainment_interval.low],
            [s.attainment_interval.high - s.attainment],
        ],
        fmt="o",
        color=colour,
        capsize=4,
        label=f"attainment {s.attainment:.3f}",
    )
    ax.axvline(target, color=_svg.INK, linestyle="--", label=f"target {s.attainment_target}")
    ax.set_xlim(0, 1.005)
    ax.set_yticks([])
    ax.set_xlabel("good / offers")
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5))
    return _svg.to_svg(fig, f"attainment of {run.path.name}")


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


def timeline_figure(run: TrialRun) -> str:
    """Per request due/sent/end coloured by status; lag; in flight over time."""
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
    for colour, name in (
        (_svg.GOOD, "good"),
        (_svg.SLOW, "completed, too slow"),
        (_svg.ERROR, "error"),
        (_svg.MISS, "schedule miss"),
    ):
        lanes.plot([], [], color=colour, linewidth=3, label=name)
    lanes.set_ylabel("request")
    _svg.integer_ticks(lanes.yaxis)
    _svg.integer_ticks(flight_ax.yaxis)
    lanes.invert_yaxis()
    lanes.set_title(f"{run.path.name}: {len(records)} offers at {run.manifest.rate:g}/s")
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


__all__ = ["in_flight_steps", "trial_section"]
