"""What ``--compare A B`` was given: narwhal-trial's comparison of the two sides (its verdicts)
and each side's runs and edge search read back through narwhal-trial's public readers, for the
figures; a refusal or an unreadable side is one ``ReportUsageError`` line."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from narwhal_report._errors import ReportUsageError
from narwhal_trial import (
    CompareRequest,
    Comparison,
    EdgeRun,
    TrialError,
    TrialRun,
    compare_sides,
    is_run_folder,
    read_edge,
    read_run,
)

CONFIDENCE_RANGE = (0.5, 0.999)
"""The confidences ``narwhal-trial compare`` accepts, both ends included."""


@dataclass(frozen=True, slots=True)
class SideRuns:
    """One side's runs in the order compare read them, and its edge search when it is one."""

    label: str
    path: Path
    runs: list[TrialRun]
    edge: EdgeRun | None

    def run(self, path: str) -> TrialRun:
        """The run read from ``path`` (a pair's ``run_a`` or ``run_b``), read again should the
        side not hold it."""
        found = [r for r in self.runs if str(r.path) == path]
        return found[0] if found else read_run(Path(path))


@dataclass(frozen=True, slots=True)
class Compared:
    """The comparison, both sides as read, and each rate pair's two runs (in the comparison's
    order)."""

    doc: Comparison
    a: SideRuns
    b: SideRuns
    pairs: list[tuple[TrialRun, TrialRun]]


def read_comparison(request: CompareRequest) -> Compared:
    """Compare the two sides and read their runs; ``ReportUsageError`` for a confidence out of
    range, a side that is missing or unreadable, or sides compare refuses (not comparable)."""
    low, high = CONFIDENCE_RANGE
    if not low <= request.confidence <= high:
        raise ReportUsageError(
            f"--confidence must be in [{low}, {high}], got {request.confidence:g}"
        )
    try:
        doc = compare_sides(request)
        a = _side("A", doc.a.path, doc.a.kind)
        b = _side("B", doc.b.path, doc.b.kind)
        pairs = [(a.run(p.run_a), b.run(p.run_b)) for p in doc.pairs]
    except TrialError as exc:
        raise ReportUsageError(f"--compare: {exc.message}") from exc
    except OSError as exc:
        where = f" {exc.filename}" if exc.filename else ""
        raise ReportUsageError(f"--compare:{where} cannot be read ({exc.strerror or exc})") from exc
    return Compared(doc, a, b, pairs)


def _side(label: str, given: str, kind: str) -> SideRuns:
    """A side read again as compare read it: an edge folder's trials, one run folder, or the run
    folders inside a folder (sorted by name)."""
    path = Path(given)
    if kind == "edge":
        edge = read_edge(path)
        return SideRuns(label, path, list(edge.runs), edge)
    if kind == "run":
        return SideRuns(label, path, [read_run(path)], None)
    runs = [read_run(p) for p in sorted(path.iterdir()) if is_run_folder(p)]
    return SideRuns(label, path, runs, None)
