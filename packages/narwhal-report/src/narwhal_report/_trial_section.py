"""Per trial run: the verdict, TTFT and TPOT CDFs with the SLO lines, attainment with its interval
against the target, a timeline of due, sent and lag per request with in-flight over time and status
colours (a scheduled workload's run: its schedule's views and a timeline binned beyond 500 offers,
``_schedule_section``), the server's view when the run has one (``_server_section``), the
client's saturation evidence and the manifest's provenance."""

from __future__ import annotations

from decimal import Decimal

from narwhal_report import _svg
from narwhal_report._html import Section, badge, facts, figure, join, ms, slug, tag
from narwhal_report._schedule_section import schedule_part
from narwhal_report._server_section import server_view
from narwhal_report._timeline import TIMELINE_CAPTION, in_flight_steps, timeline_figure
from narwhal_trial import TrialRun


def trial_section(run: TrialRun, index: int) -> Section:
    """The whole section of one run."""
    m, s = run.manifest, run.summary
    pace = (
        f"{m.rate:g} request/s"
        if s.schedule is None
        else f"{s.schedule.source} x{s.schedule.speedup:g}, mean {s.schedule.mean_rate:.3g} "
        "request/s"
    )
    title = f"Trial {pace}: {run.path.name}"
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
                f"TTFT ≤ {m.ttft_s} s, TPOT ≤ {m.tpot_s} s; "
                + (
                    f"{m.input_tokens} in / {m.output_tokens} out"
                    if s.schedule is None
                    else "each request's lengths from the schedule"
                ),
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
            (
                figure(timeline_figure(run), TIMELINE_CAPTION)
                if s.schedule is None
                else schedule_part(run, s.schedule, index)
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


__all__ = ["in_flight_steps", "trial_section"]
