"""The comparison page (``narwhal-report --compare A B``): the overall line and the verdicts at
the top, what differs, then each rate pair's TTFT and TPOT distributions overlaid, attainment
against rate with both sides, and the engines' fit ratios when the comparison has profiles; one
self-contained HTML file as the report's."""

from __future__ import annotations

from narwhal_report import _svg
from narwhal_report._document import contents, footer, generator, html_page, render_section
from narwhal_report._html import Markup, Section, figure, join, slug, table, tag
from narwhal_report.compare._figures import attainment_figure, cdf_pair_figure, fit_ratio_figure
from narwhal_report.compare._inputs import Compared, read_comparison
from narwhal_report.compare._verdicts import (
    differences,
    edge_part,
    fits_in_brief,
    load_words,
    overall,
    sides,
    verdict_badge,
    verdict_table,
)
from narwhal_trial import CompareRequest

TITLE = "narwhal comparison"
FITS_ID = "engine-fits"
CSS = """
p.overall { font-size: 16px; padding: 8px 14px; margin: 12px 0; border-left: 6px solid; }
p.overall.ok { background: #e8f5ef; border-color: var(--ok); }
p.overall.bad { background: #fbeceb; border-color: var(--bad); }
.muted { color: var(--muted); font-size: 12px; }
table.verdicts { width: 100%; font-size: 12.5px; }
table.verdicts td { vertical-align: top; }
table.verdicts td:first-child { min-width: 120px; }
table.verdicts td + td { white-space: nowrap; }
table.verdicts td:nth-child(5) { white-space: normal; }
table.verdicts tr.v-bad td { background: #fbeceb; }
table.verdicts tr.v-ok td { background: #e8f5ef; }
table.verdicts tr.pair-start td { border-top: 2px solid #999; }
table.verdicts tr td:first-child { background: #fff; }
table.differs td { vertical-align: top; }
table.differs code { font-size: 12px; word-break: break-all; }
.badge.bad { background: #fff; } .badge.ok { background: #fff; }
@media print {
  p.overall, table.verdicts tr td { background: none; }
  table.verdicts tr.v-bad td:last-child, table.verdicts tr.v-ok td:last-child {
    font-weight: 700; }
}
"""


def render_comparison(request: CompareRequest) -> bytes:
    """Compare ``request``'s two sides (as ``narwhal-trial compare``) and draw the page (UTF-8);
    ``ReportUsageError`` when a side is missing or unreadable or the sides are not comparable."""
    compared = read_comparison(request)
    with _svg.plotting():
        sections = comparison_sections(compared)
    doc = compared.doc
    lead = (
        f"B against A at {doc.confidence:.0%} confidence (bootstrap seed {doc.seed}); every "
        "difference is B minus A. A verdict is better or worse only when its interval excludes "
        "no change; no detectable difference is not equal: the detectable column says how large "
        "a difference these samples would have found (80 % power)."
    )
    body = join(
        [
            tag("header", join([tag("h1", TITLE), tag("p", lead, class_="sub")])),
            overall(doc),
            sides(doc),
            contents(sections),
            join(render_section(s, 2, first=k == 0) for k, s in enumerate(sections)),
            footer(f"Judged by {doc.generator}; written by {generator()}."),
        ]
    )
    return html_page(TITLE, body, CSS)


def comparison_sections(compared: Compared) -> list[Section]:
    """Every top-level section, figures drawn (call inside :func:`_svg.plotting`)."""
    doc = compared.doc
    no_pairs = tag("p", "The sides share no offered load: only their edges are judged.")
    verdicts = join(
        [
            verdict_table(doc) if doc.pairs else no_pairs,
            edge_part(doc.edge),
            fits_in_brief(doc.profiles, FITS_ID),
        ]
    )
    sections = [
        Section("verdicts", "Verdicts", verdicts),
        Section("what-differs", "What differs", differences(doc)),
    ]
    pairs = []
    for k, (pair, (run_a, run_b)) in enumerate(zip(doc.pairs, compared.pairs, strict=True), 1):
        load = load_words(pair)
        caption = (
            f"Every measured TTFT and TPOT of A's run {run_a.path.name} (blue) and B's run "
            f"{run_b.path.name} (orange) as cumulative distributions: the values the verdicts "
            "judged. Dashed: the SLO bounds; dotted: the p50 and p99 levels, where a curve's "
            "crossing is its quantile."
        )
        body = figure(cdf_pair_figure(run_a, run_b, f"at {load}"), caption)
        pairs.append(Section(slug("latency", k, load), f"At {load}", body))
    if pairs:
        sections.append(Section("latency", "Latency distributions", Markup(""), pairs))
    brackets = [s.label for s in (compared.a, compared.b) if s.edge is not None]
    caption = (
        "Every run of each side at its offered rate with its 95% Wilson interval (A blue "
        "circles, B orange squares, set a little apart; filled: passed, hollow: missed) and the "
        "target dashed"
        + (
            f"; the measured bracket of {' and '.join(brackets)} between its highest pass and "
            "lowest miss (shaded: A over the upper half, B over the lower)."
            if brackets
            else "."
        )
    )
    body = figure(attainment_figure(compared), caption)
    sections.append(Section("attainment", "Attainment against rate", body))
    if doc.profiles:
        sections.append(Section(FITS_ID, "Engine fits", _fits(compared)))
    return sections


def _fits(compared: Compared) -> Markup:
    profiles = compared.doc.profiles or []
    rows = [
        [
            f.engine,
            f.phase,
            f.at,
            f"{f.a_s * 1e3:.2f} ms",
            f"{f.b_s * 1e3:.2f} ms",
            f"{f.ratio:.3f} [{f.low:.3f}, {f.high:.3f}]",
            verdict_badge(f.verdict),
        ]
        for f in profiles
    ]
    return join(
        [
            figure(
                fit_ratio_figure(profiles),
                "B's fitted latency over A's at each point of the profiled domain, with its "
                "interval from the raw samples' spread; left of the dashed line B is faster.",
            ),
            table(["engine", "phase", "at", "A", "B", "B / A [interval]", "verdict"], rows),
        ]
    )
