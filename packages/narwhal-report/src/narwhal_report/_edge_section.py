"""A measured capacity search (``load_trial.py edge``): its trials' attainment against rate, the
measured bracket (highest pass, lowest miss) beside the predicted band (pass_90, pass_50, pass_10)
and any predicted curve, and a table of the trials with their verdicts."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from narwhal_report import _svg
from narwhal_report._html import Markup, Section, badge, esc, facts, figure, join, slug, table, tag
from narwhal_report._sweep_section import Curve, draw_curves, draw_measured, finish_attainment_axes
from narwhal_trial import EdgeRun, EdgeSearch

_VERDICT_COLOUR = {
    "pass": _svg.GOOD,
    "miss": _svg.ERROR,
    "invalid": _svg.MISS,
    "error": _svg.GREY,
    "interrupted": _svg.GREY,
}


def _rate(rate: float | None) -> str:
    return "none" if rate is None else f"{rate:.4g} request/s"


def _verdict_badge(verdict: str) -> Markup:
    if verdict in ("pass", "miss"):
        return badge(verdict == "pass")
    return tag("span", verdict.upper(), class_="badge na")


def edge_section(edge: EdgeRun, index: int, curves: list[Curve], notes: list[str]) -> Section:
    """The section of one edge folder."""
    doc = edge.search
    i, b = doc.inputs, doc.bracket
    rows = [
        [
            str(t.index),
            f"{t.rate:g}/s",
            t.run,
            f"{t.good}/{t.requests} (need {t.required_good})",
            f"{t.attainment:.3f}",
            _verdict_badge(t.verdict),
            badge(t.client_schedule_valid, "VALID", "INVALID"),
            "first" if t.repeat == 0 else f"repeat {t.repeat}",
        ]
        for t in doc.trials
    ]
    band = doc.predicted
    width = "n/a" if b.width is None else f"{b.width:.1%}"
    summary = facts(
        [
            (
                "bracket",
                f"highest pass {_rate(b.highest_pass)}, lowest miss {_rate(b.lowest_miss)}, "
                f"width {width} (tolerance {i.tolerance:.1%}: "
                f"{'within' if b.within_tolerance else 'not within'})",
            ),
            (
                "trials",
                f"{len(doc.trials)} of at most {i.max_trials}, {i.requests} requests each; "
                f"started {i.start} at {i.start_rate:g}/s",
            ),
            ("ended", f"{doc.stop or 'still running'}: {doc.message or ''} (exit {doc.exit_code})"),
            (
                "predicted band",
                "none (no profiles given)"
                if band is None
                else f"pass_90 {_rate(band.pass_90)}, pass_50 {_rate(band.pass_50)}, pass_10 "
                f"{_rate(band.pass_10)} ({band.replications} replication(s), from "
                f"{band.profiles})",
            ),
            (
                "predicted sustainable rate",
                "none"
                if band is None or band.sustainable_rate is None
                else f"{_rate(band.sustainable_rate)} ({band.sustainable_source}): what the fleet "
                "keeps up with for as long as a trial lasts; a short trial's edge may lie above it",
            ),
        ]
    )
    parts = [
        tag(
            "p",
            f"{edge.path.name}: {i.requests} x {i.input_tokens} in / {i.output_tokens} out, TTFT ≤ "
            f"{i.ttft_s} s, TPOT ≤ {i.tpot_s} s, attainment ≥ {i.attainment}",
            class_="sub",
        ),
        summary,
    ]
    if doc.trials:
        parts.append(
            figure(
                edge_figure(edge, curves),
                "Each trial's attainment (with its 95% interval), coloured by the search's verdict "
                "(invalid schedules purple: repeated, never read as misses); the measured bracket "
                "between the highest pass and the lowest miss (green band); the predicted band "
                "from pass_90 to pass_10 (blue, dashed at pass_50), the predicted sustainable rate "
                "(grey, dotted) and any curve predicted from a "
                "store given.",
            )
        )
    parts.append(
        table(["#", "rate", "run", "good", "attainment", "verdict", "schedule", "attempt"], rows)
    )
    if notes:
        parts.append(tag("ul", join(tag("li", esc(line)) for line in notes)))
    title = f"Measured edge: {edge.path.name}"
    return Section(slug("edge", index, edge.path.name), title, join(parts))


def edge_figure(edge: EdgeRun, curves: list[Curve]) -> str:
    """Trials, bracket, predicted band and curves on one attainment-against-rate plot."""
    doc = edge.search
    fig, axes = _svg.new_figure(1, 1, size=(9.0, 3.4))
    ax = axes[0][0]
    target = float(Decimal(doc.inputs.attainment))
    draw_curves(ax, curves)
    _band_and_bracket(ax, doc, target)
    for trial, run in zip(doc.trials, edge.runs, strict=True):
        draw_measured(ax, trial.rate, run.summary, _VERDICT_COLOUR[trial.verdict])
    for verdict in sorted({t.verdict for t in doc.trials}):
        ax.plot([], [], "o", color=_VERDICT_COLOUR[verdict], label=f"trial, {verdict}")
    finish_attainment_axes(ax, target)
    return _svg.to_svg(fig, "measured edge against the predicted band")


def _band_and_bracket(ax: Any, doc: EdgeSearch, target: float) -> None:
    band, b = doc.predicted, doc.bracket
    hp, lm = b.highest_pass, b.lowest_miss
    if band is not None:
        ends = [v for v in (band.pass_90, band.pass_10) if v is not None]
        if len(ends) == 2 and ends[0] < ends[1]:
            label = "predicted band, pass_90 to pass_10"
            ax.axvspan(*ends, color=_svg.BLUE, alpha=0.12, linewidth=0, label=label)
        if band.pass_50 is not None:
            label = f"predicted pass_50 {band.pass_50:.4g}/s"
            ax.axvline(band.pass_50, color=_svg.BLUE, linestyle="--", label=label)
        if band.sustainable_rate is not None and doc.inputs.searched == "rate":
            label = f"predicted sustainable {band.sustainable_rate:.4g}/s"
            ax.axvline(band.sustainable_rate, color=_svg.GREY, linestyle=":", label=label)
    if hp is not None and lm is not None:
        label = f"measured bracket {hp:.4g} to {lm:.4g}/s"
        ax.axvspan(hp, lm, color=_svg.GOOD, alpha=0.22, linewidth=0, label=label)
    for rate, marker, colour, label in ((hp, ">", _svg.GOOD, "highest pass"),
                                        (lm, "<", _svg.ERROR, "lowest miss")):  # fmt: skip
        if rate is not None:
            ax.plot([rate], [target], marker=marker, markersize=9, color=colour,
                    linestyle="none", zorder=5, label=label)  # fmt: skip
