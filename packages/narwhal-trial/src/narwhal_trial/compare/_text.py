"""``compare``'s lines on the terminal: the two sides, what differs, a line per measure with its
interval, the edges, the engines' fits (a line per engine in words, then one per point), and the
verdict."""

from __future__ import annotations

import re

from narwhal_trial.documents._comparison import (
    Comparison,
    FitChange,
    ProportionVerdict,
    ShiftVerdict,
    SideFacts,
)


def render_text(doc: Comparison) -> str:
    """The comparison as plain lines (B against A; a difference is B minus A)."""
    lines = [f"A: {_side(doc.a)}", f"B: {_side(doc.b)}"]
    if doc.workloads_differ:
        lines.append("   the workloads differ (--allow-different-workloads)")
    if doc.differences:
        lines.append("what differs:")
        lines.extend(f"   {d.what}: {d.a or '-'} | {d.b or '-'}" for d in doc.differences)
    for pair in doc.pairs:
        load = (
            f"{pair.rate_a:g}"
            if pair.rate_a == pair.rate_b
            else f"{pair.rate_a:g} | {pair.rate_b:g}"
        )
        lines.append(f"at {load} request/s:")
        lines.append("   " + _attainment(pair.attainment))
        lines.extend("   " + _shift(s) for s in pair.latency)
    if doc.edge is not None:
        lines.append(f"edge: {doc.edge.verdict}: {doc.edge.reason}")
    if doc.profiles is not None:
        lines.extend(_profiles(doc.profiles, doc.confidence))
    pct = f"{doc.confidence:.0%}"
    if doc.worse:
        lines.append(f"verdict at {pct}: worse: {'; '.join(doc.worse)} (exit 2)")
    else:
        lines.append(f"verdict at {pct}: nothing got worse (exit 0)")
    return "\n".join(lines)


def _side(s: SideFacts) -> str:
    rates = ", ".join(f"{r:g}" for r in s.rates)
    what = {"run": "run", "edge": "edge search", "runs": "runs"}[s.kind]
    return f"{what} {s.path} ({len(s.runs)} run{'s' * (len(s.runs) != 1)} at {rates} request/s)"


def _attainment(p: ProportionVerdict) -> str:
    a, b = p.good_a / p.requests_a, p.good_b / p.requests_b
    return (
        f"attainment {a:.3f} -> {b:.3f} ({p.good_a}/{p.requests_a} -> {p.good_b}/{p.requests_b}): "
        f"{_pts(p.difference)} [{_pts(p.low)}, {_pts(p.high)}] {p.verdict} "
        f"(these samples detect {abs(p.detectable) * 100:.1f} points)"
    )


def _pts(x: float) -> str:
    return f"{x * 100:+.1f} pts"


def _shift(s: ShiftVerdict) -> str:
    rel = f" ({s.difference_s / s.a_s:+.1%})" if s.a_s > 0 else ""
    return (
        f"{s.measure.upper()} p{s.quantile} {_ms(s.a_s)} -> {_ms(s.b_s)}: "
        f"{_ms(s.difference_s, sign=True)}{rel} [{_ms(s.low_s, sign=True)}, "
        f"{_ms(s.high_s, sign=True)}] {s.verdict} (these samples detect {_ms(s.detectable_s)})"
    )


def _ms(seconds: float, *, sign: bool = False) -> str:
    return f"{seconds * 1e3:+.1f} ms" if sign else f"{seconds * 1e3:.1f} ms"


def _profiles(changes: list[FitChange], confidence: float) -> list[str]:
    """A summary line per engine (each phase's verdict in words), then a line per point."""
    if not changes:
        return ["profiles: the stores measured no point in common"]
    lines = [f"profiles: B's fits against A's (ratio B/A, {confidence:.0%} interval):"]
    engines: dict[str, list[FitChange]] = {}
    for f in changes:
        engines.setdefault(f.engine, []).append(f)
    for engine, points in engines.items():
        phases = [p for p in ("prefill", "decode") if any(f.phase == p for f in points)]
        summary = ", ".join(_phase(p, [f for f in points if f.phase == p]) for p in phases)
        lines.append(f"   {engine}: {summary}")
        lines.extend("      " + _fit(f) for f in points)
    return lines


def _phase(phase: str, points: list[FitChange]) -> str:
    """``prefill 7% faster at 8,192 tokens``, ``decode up to 15% slower (4 of 4 points, most at
    concurrency 4 at 4,096 tokens)``, ``decode no detectable change``."""
    parts = []
    for verdict, words in (("worse", "slower"), ("better", "faster")):
        found = [f for f in points if f.verdict == verdict]
        if not found:
            continue
        most = max(found, key=lambda f: abs(f.ratio - 1))
        at, count = _numbers(most.at), f"{len(found)} of {len(points)} points"
        if len(found) > 1:
            parts.append(f"up to {_pct(most.ratio)} {words} ({count}, most at {at})")
        else:
            parts.append(f"{_pct(most.ratio)} {words} at {at}" + f" ({count})" * (len(points) > 1))
    return f"{phase} {' and '.join(parts) if parts else 'no detectable change'}"


def _pct(ratio: float) -> str:
    change = abs(ratio - 1)
    return f"{change:.1%}" if change < 0.095 else f"{change:.0%}"


def _numbers(text: str) -> str:
    """``8192 tokens`` as ``8,192 tokens``."""
    return re.sub(r"\d{4,}", lambda m: f"{int(m[0]):,}", text)


def _fit(f: FitChange) -> str:
    words = "slower" if f.ratio > 1 else "faster"
    return (
        f"{f.phase} at {_numbers(f.at)}: {_ms(f.a_s)} -> {_ms(f.b_s)}, {_pct(f.ratio)} {words}, "
        f"ratio {f.ratio:.3f} [{f.low:.3f}, {f.high:.3f}]: {f.verdict}"
    )
