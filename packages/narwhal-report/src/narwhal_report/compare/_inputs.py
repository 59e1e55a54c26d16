"""What ``--compare A B`` was given: the two sides read once by narwhal-trial, its comparison of
them (the verdicts), and each rate pair's two runs, for the figures; a refusal or an unreadable
side is one ``ReportUsageError`` line."""

from __future__ import annotations

from dataclasses import dataclass

from narwhal_report._errors import ReportUsageError
from narwhal_trial import (
    CompareRequest,
    CompareSide,
    Comparison,
    TrialError,
    TrialRun,
    compare_sides,
    read_compare_side,
)


@dataclass(frozen=True, slots=True)
class Compared:
    """The comparison, both sides as compare read them, and each rate pair's two runs (in the
    comparison's order)."""

    doc: Comparison
    a: CompareSide
    b: CompareSide
    pairs: list[tuple[TrialRun, TrialRun]]


def read_comparison(request: CompareRequest) -> Compared:
    """Read the two sides once and compare them; ``ReportUsageError`` for a confidence out of
    range, a side that is missing or unreadable, or sides compare refuses (not comparable)."""
    try:
        a = read_compare_side(request.a, "A")
        b = read_compare_side(request.b, "B")
        doc = compare_sides(request, (a, b))
    except TrialError as exc:
        raise ReportUsageError(f"--compare: {exc.message}") from exc
    except OSError as exc:
        where = f" {exc.filename}" if exc.filename else ""
        raise ReportUsageError(f"--compare:{where} cannot be read ({exc.strerror or exc})") from exc
    runs = {str(r.path): r for side in (a, b) for r in side.every_run}
    return Compared(doc, a, b, [(runs[p.run_a], runs[p.run_b]) for p in doc.pairs])
