"""The document: one self-contained HTML page (inline CSS, inline SVG, no script, no URL fetched),
readable on screen and on paper."""

from __future__ import annotations

from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from narwhal_report import _svg
from narwhal_report._edge_section import edge_section
from narwhal_report._errors import ReportUsageError
from narwhal_report._html import Markup, Section, esc, join, tag
from narwhal_report._inputs import Inputs
from narwhal_report._probe_section import probe_section
from narwhal_report._profile_section import store_sections
from narwhal_report._sweep_model import sweep_model
from narwhal_report._sweep_section import Curve, predict_curve, sweep_section, workload_groups
from narwhal_report._sweep_spread import MAX_REPLICATIONS, REPLICATIONS, Spread, predict_spread
from narwhal_report._trial_section import trial_section
from narwhal_trial import TrialRun

CSS = """
:root { --ink: #222; --muted: #666; --line: #ddd; --ok: #00734f; --bad: #b3261e; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", "DejaVu Sans", sans-serif;
  color: var(--ink); max-width: 1100px; margin: 0 auto; padding: 24px 32px 64px; }
h1 { font-size: 24px; margin: 0 0 4px; }
h2 { font-size: 20px; margin: 40px 0 8px; padding-top: 12px; border-top: 3px solid var(--ink); }
h3 { font-size: 17px; margin: 28px 0 6px; padding-top: 8px; border-top: 1px solid var(--line); }
h4 { font-size: 14px; margin: 18px 0 6px; }
p.sub { color: var(--muted); margin: 0 0 10px; }
nav { border: 1px solid var(--line); border-radius: 6px; padding: 8px 16px; margin: 16px 0; }
nav ul { margin: 4px 0; padding-left: 20px; }
a { color: #0b5cad; text-decoration: none; }
table { border-collapse: collapse; margin: 8px 0 12px; font-size: 13px; }
table.grid th, table.grid td { border: 1px solid var(--line); padding: 3px 8px; text-align: left; }
table.grid th { background: #f4f4f4; }
table.facts th { text-align: left; font-weight: 600; padding: 2px 16px 2px 0; vertical-align: top;
  white-space: nowrap; color: #444; }
table.facts td { padding: 2px 0; word-break: break-all; }
figure { margin: 12px 0 18px; break-inside: avoid; page-break-inside: avoid; }
figure svg { width: 100%; height: auto; max-width: 900px; display: block; }
figcaption { color: var(--muted); font-size: 12.5px; max-width: 900px; }
.badge { display: inline-block; padding: 0 8px; border-radius: 10px; font-weight: 700;
  font-size: 12px; letter-spacing: .04em; border: 1.5px solid; }
.badge.ok, .ok { color: var(--ok); } .badge.bad, .bad { color: var(--bad); }
.badge.na { color: var(--muted); }
.warn { border-left: 5px solid #e69f00; background: #fff6e0; padding: 8px 14px; margin: 10px 0; }
.warn ul { margin: 4px 0 0; padding-left: 20px; }
footer { margin-top: 48px; color: var(--muted); font-size: 12px; }
@media print {
  body { max-width: none; padding: 0; font-size: 11px; }
  nav { display: none; }
  h2 { break-before: page; page-break-before: always; }
  h2.first { break-before: auto; page-break-before: auto; }
  h3, h4 { break-after: avoid; page-break-after: avoid; }
  .warn { background: none; }
  a { color: inherit; }
  table, .warn { break-inside: avoid; page-break-inside: avoid; }
}
"""


@dataclass(frozen=True, slots=True)
class Options:
    """What the report assumes beyond its inputs (the settings no record holds), and how many
    Monte Carlo replications it runs at each measured rate of a sweep (1: none, the fits alone)."""

    kv_transfer_s_per_token: float = 0.0
    replications: int = REPLICATIONS

    def __post_init__(self) -> None:
        if not 1 <= self.replications <= MAX_REPLICATIONS:
            raise ReportUsageError(
                f"--replications must be 1 to {MAX_REPLICATIONS}, got {self.replications}"
            )


def generator() -> str:
    """``narwhal-report <version>``."""
    try:
        return f"narwhal-report {version('narwhal-report')}"
    except PackageNotFoundError:
        return "narwhal-report (not installed)"


def build_sections(inputs: Inputs, options: Options) -> list[Section]:
    """Every top-level section, figures drawn (call inside :func:`_svg.plotting`)."""
    sections = [store_sections(loaded, k) for k, loaded in enumerate(inputs.stores, start=1)]
    sections += [
        probe_section(path, probe, k, inputs.stores)
        for k, (path, probe) in enumerate(inputs.probes.items(), start=1)
    ]
    trials = [trial_section(run, k) for k, run in enumerate(inputs.runs, start=1)]
    if trials:
        sections.append(Section("trials", "Trials", Markup(""), trials))
    sweeps = []
    for k, group in enumerate(workload_groups(inputs.runs), start=1):
        curves, notes, spreads = _predictions(inputs, group, options, monte_carlo=True)
        if options.replications == 1 and curves:
            notes.append("no Monte Carlo at the measured rates (--replications 1)")
        if len(group) > 1 or curves:
            sweeps.append(sweep_section(group, k, curves, notes, spreads))
    if sweeps:
        sections.append(Section("across-trials", "Across trials", Markup(""), sweeps))
    edges = [
        edge_section(edge, k, *_predictions(inputs, edge.runs, options)[:2])
        for k, edge in enumerate(inputs.edges, start=1)
    ]
    if edges:
        sections.append(Section("edges", "Measured edges", Markup(""), edges))
    return sections


def _predictions(
    inputs: Inputs, runs: list[TrialRun], options: Options, *, monte_carlo: bool = False
) -> tuple[list[Curve], list[str], list[Spread]]:
    """The curve each store predicts for ``runs`` (one workload), why a store gives none, and
    (``monte_carlo``) each store's Monte Carlo prediction at the runs' rates, through the newest
    probe of that store given."""
    curves: list[Curve] = []
    notes: list[str] = []
    spreads: list[Spread] = []
    if not runs:
        return curves, notes, spreads
    for loaded in inputs.stores:
        fleet = inputs.fleets.get(loaded.path)
        if not isinstance(fleet, Path):
            notes.append(f"no prediction from {loaded.path.name}: {fleet}")
            continue
        found = sweep_model(runs, loaded.path, fleet, options.kv_transfer_s_per_token)
        if isinstance(found, str):
            notes.append(found)
            continue
        curves.append(predict_curve(runs, found))
        if monte_carlo and options.replications > 1:
            probes = inputs.probes_of(loaded)
            spreads.append(predict_spread(runs, found, probes, options.replications))
    return curves, notes, spreads


def contents(sections: list[Section]) -> Markup:
    """The page's table of contents: each section and its subsections, linked."""
    items = []
    for s in sections:
        sub = join(tag("li", tag("a", c.title, href=f"#{c.id}")) for c in s.children)
        items.append(
            tag(
                "li",
                join(
                    [
                        tag("a", s.title, href=f"#{s.id}"),
                        tag("ul", sub) if s.children else Markup(""),
                    ]
                ),
            )
        )
    return tag("nav", join([tag("strong", "Contents"), tag("ul", join(items))]))


def render_section(section: Section, level: int, first: bool = False) -> Markup:
    """``section`` as HTML, its heading at ``level``, its subsections one level down."""
    heading = tag(f"h{level}", section.title, id=section.id, class_="first" if first else None)
    children = join(render_section(c, level + 1) for c in section.children)
    return tag("section", join([heading, section.body, children]), class_=f"level{level}")


def render(inputs: Inputs, options: Options | None = None) -> bytes:
    """The whole HTML document (UTF-8)."""
    with _svg.plotting():
        sections = build_sections(inputs, options or Options())
    n_profiles = sum(len(s.store.profiles) for s in inputs.stores)
    lead = (
        f"{len(inputs.stores)} profile store(s) with {n_profiles} profile(s), "
        f"{len(inputs.runs)} trial run(s)"
        + (f", {len(inputs.edges)} edge search(es)" if inputs.edges else "")
        + (f", {len(inputs.probes)} freshness probe(s)." if inputs.probes else ".")
    )
    body = join(
        [
            tag("header", join([tag("h1", "narwhal report"), tag("p", lead, class_="sub")])),
            contents(sections),
            join(render_section(s, 2, first=k == 0) for k, s in enumerate(sections)),
            footer(f"Written by {generator()}."),
        ]
    )
    return html_page("narwhal report", body)


def footer(written_by: str) -> Markup:
    """The page's last words: who wrote it, and that it fetches nothing."""
    return tag(
        "footer",
        f"{written_by} Self-contained: no script, no font and no address is fetched; figures "
        "are static SVG.",
    )


def html_page(title: str, body: Markup, css: str = "") -> bytes:
    """The whole HTML document around ``body`` (UTF-8; ``css`` added to the page's own), every
    inline SVG's ids made unique."""
    page = (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{esc(title)}</title>\n<style>{CSS}{css}</style>\n</head>\n"
        f"<body>\n{body}\n</body>\n</html>\n"
    )
    return _svg.unique_ids(page).encode()
