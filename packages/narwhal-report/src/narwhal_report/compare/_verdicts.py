"""The top of a comparison page: the overall line, the two sides, the verdict table (per rate pair
and measure: A, B, the difference B minus A with its interval, the smallest difference the samples
detect, the verdict coloured), the edges' verdict, the engines' fits in brief, and what differs
between the two sides' manifests."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from narwhal_report._html import Markup, esc, facts, join, table, tag, warnings
from narwhal_trial import (
    Comparison,
    EdgeVerdict,
    FitChange,
    ProportionVerdict,
    RatePair,
    ShiftVerdict,
    SideFacts,
)

VERDICT_CLASS = {"better": "ok", "worse": "bad", "no detectable difference": "na"}
"""The badge class of each verdict: green, red, grey."""
_KIND = {"run": "run folder", "edge": "edge folder", "runs": "folder of run folders"}


def verdict_badge(verdict: str) -> Markup:
    """The verdict as a coloured word."""
    return tag("span", verdict, class_=f"badge {VERDICT_CLASS[verdict]}")


def overall(doc: Comparison) -> Markup:
    """One line: nothing got worse, or every measure that did."""
    at = f"At {doc.confidence:.0%} confidence, B against A: "
    if doc.worse:
        words = join([at, tag("strong", "worse"), ": ", "; ".join(doc.worse)])
        return tag("p", words, class_="overall bad")
    return tag("p", join([at, tag("strong", "nothing got worse")]), class_="overall ok")


def sides(doc: Comparison) -> Markup:
    """Both sides: what each is, its path, its runs and rates; a warning when the workloads
    differ."""
    rows = [(label, _side(s)) for label, s in (("A (baseline)", doc.a), ("B (change)", doc.b))]
    note = (
        ["the two sides ran different workloads (compared with --allow-different-workloads): "
         "a difference may be the workload's, not the deployment's"]
        if doc.workloads_differ else []
    )  # fmt: skip
    return join([facts(rows), warnings(note)])


def _side(s: SideFacts) -> str:
    rates = ", ".join(f"{r:g}" for r in s.rates)
    count = f"{len(s.runs)} run{'s' * (len(s.runs) != 1)}"
    return f"{s.path} ({_KIND[s.kind]}: {count} at {rates} request/s)"


def verdict_table(doc: Comparison) -> Markup:
    """A row per rate pair and measure; each pair's first row names the load and the runs."""
    rows: list[Markup] = []
    for pair in doc.pairs:
        measures = [_attainment(pair.attainment), *(_shift(s) for s in pair.latency)]
        for k, (cells, verdict) in enumerate(measures):
            load = _load(pair) if k == 0 else Markup("")
            rows.append(_row([load, *cells, verdict_badge(verdict)], verdict, first=k == 0))
    head = ["offered load", "measure", "A", "B", "B minus A [interval]", "detectable", "verdict"]
    header = tag("tr", join(tag("th", h) for h in head))
    body = join(rows)
    return tag("table", join([tag("thead", header), tag("tbody", body)]), class_="grid verdicts")


def _row(cells: Sequence[object], verdict: str, *, first: bool) -> Markup:
    classes = f"v-{VERDICT_CLASS[verdict]}" + (" pair-start" if first else "")
    return tag("tr", join(tag("td", c) for c in cells), class_=classes)


def load_words(pair: RatePair) -> str:
    """The pair's offered load: ``4 request/s`` (a scheduled workload's speedup beside it), or
    each side's when the two single runs differ."""

    def one(rate: float, speedup: float | None) -> str:
        return f"{rate:g} request/s" + ("" if speedup is None else f" (x{speedup:g})")

    a, b = one(pair.rate_a, pair.speedup_a), one(pair.rate_b, pair.speedup_b)
    return a if a == b else f"A {a}, B {b}"


def _load(pair: RatePair) -> Markup:
    runs = f"A {_name(pair.run_a)} · B {_name(pair.run_b)}"
    load = tag("strong", load_words(pair))
    return join([load, Markup("<br>"), tag("span", runs, class_="muted")])


def _name(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1]


def _attainment(p: ProportionVerdict) -> tuple[list[object], str]:
    a, b = p.good_a / p.requests_a, p.good_b / p.requests_b
    return [
        "attainment",
        f"{a:.3f} ({p.good_a}/{p.requests_a})",
        f"{b:.3f} ({p.good_b}/{p.requests_b})",
        f"{_pts(p.difference)} [{p.low * 100:+.1f}, {p.high * 100:+.1f}]",
        f"{abs(p.detectable) * 100:.1f} pts",
    ], p.verdict


def _pts(x: float) -> str:
    return f"{x * 100:+.1f} pts"


def _shift(s: ShiftVerdict) -> tuple[list[object], str]:
    rel = f" ({s.difference_s / s.a_s:+.1%})" if s.a_s > 0 else ""
    return [
        f"{s.measure.upper()} p{s.quantile}",
        _ms(s.a_s),
        _ms(s.b_s),
        f"{_ms(s.difference_s, sign=True)}{rel} [{s.low_s * 1e3:+.1f}, {s.high_s * 1e3:+.1f}]",
        _ms(s.detectable_s),
    ], s.verdict


def _ms(seconds: float, *, sign: bool = False) -> str:
    return f"{seconds * 1e3:+.1f} ms" if sign else f"{seconds * 1e3:.1f} ms"


def edge_part(edge: EdgeVerdict | None) -> Markup:
    """The two measured edges' brackets and their verdict (nothing unless both sides are
    edges)."""
    if edge is None:
        return Markup("")
    return join(
        [
            tag("h4", "Measured edges"),
            facts(
                [
                    ("A bracket", _bracket(edge.a_highest_pass, edge.a_lowest_miss)),
                    ("B bracket", _bracket(edge.b_highest_pass, edge.b_lowest_miss)),
                    ("verdict", join([verdict_badge(edge.verdict), " ", esc(edge.reason)])),
                ]
            ),
        ]
    )


def _bracket(highest_pass: float | None, lowest_miss: float | None) -> str:
    def rate(r: float | None) -> str:
        return "none" if r is None else f"{r:.4g} request/s"

    return f"highest pass {rate(highest_pass)}, lowest miss {rate(lowest_miss)}"


def fits_in_brief(profiles: list[FitChange] | None, section_id: str) -> Markup:
    """Per engine, how many of its fitted points got worse or better (the table is further
    down, under ``section_id``); nothing without ``--profiles``."""
    if profiles is None:
        return Markup("")
    title = tag("h4", "Engine fits")
    if not profiles:
        return join([title, tag("p", "No engine is in both profile stores.", class_="sub")])
    by_engine: dict[str, list[FitChange]] = defaultdict(list)
    for change in profiles:
        by_engine[change.engine].append(change)
    rows = []
    for engine, changes in by_engine.items():
        count = {v: sum(c.verdict == v for c in changes) for v in VERDICT_CLASS}
        verdict = "worse" if count["worse"] else "better" if count["better"] else (
            "no detectable difference"
        )  # fmt: skip
        ratios = [c.ratio for c in changes]
        rows.append(
            [
                engine,
                f"{len(changes)}",
                f"{count['worse']} worse, {count['better']} better",
                _span(min(ratios), max(ratios)),
                verdict_badge(verdict),
            ]
        )
    link = tag("a", "every point's ratio", href=f"#{section_id}")
    return join(
        [
            title,
            table(["engine", "points", "verdicts", "B / A fitted latency", "worst verdict"], rows),
            tag("p", join(["B's fitted latency over A's; ", link, " is below."]), class_="sub"),
        ]
    )


def _span(low: float, high: float) -> str:
    return f"{low:.3f}" if f"{low:.3f}" == f"{high:.3f}" else f"{low:.3f} to {high:.3f}"


def differences(doc: Comparison) -> Markup:
    """What the two sides' first manifests disagree on (listed, not judged)."""
    if not doc.differences:
        return tag("p", "The manifests agree on everything compare looks at.", class_="sub")
    rows = [[d.what, _cell(d.a), _cell(d.b)] for d in doc.differences]
    return join(
        [
            tag(
                "p",
                "Listed, not judged: the first run of each side, as its manifest records it.",
                class_="sub",
            ),
            table(["what", "A", "B"], rows, class_="grid differs"),
        ]
    )


def _cell(value: str | None) -> Markup:
    return tag("span", "none", class_="muted") if value is None else tag("code", value)
