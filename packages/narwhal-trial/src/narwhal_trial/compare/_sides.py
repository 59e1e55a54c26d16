"""The two sides of a comparison read, checked comparable, and their differences listed.

A side is a run folder, an edge folder (its trials' runs, but those whose client fell behind:
the search repeated them), or a folder of run folders (a set at several rates). Two sides are
comparable when every run used the same workload file (unless ``--allow-different-workloads``),
the same SLO and attainment target, and kept its schedule; a refusal is one
``NotComparableError`` line naming both values.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

from narwhal_trial._errors import NotComparableError, ReadError
from narwhal_trial.documents._comparison import Difference, SideFacts, SideKind
from narwhal_trial.documents._records import Manifest
from narwhal_trial.documents._runfolder import TrialRun, is_run_folder, read_run
from narwhal_trial.edge._document import EdgeRun, is_edge_folder, read_edge


@dataclass(frozen=True, slots=True)
class CompareSide:
    """One side as read: ``label`` is ``A`` or ``B``; ``runs`` are the runs it is judged by (an
    edge's trials but those the search repeated), ``edge`` the whole edge folder as read."""

    label: str
    path: Path
    kind: SideKind
    runs: tuple[TrialRun, ...]
    edge: EdgeRun | None

    @property
    def every_run(self) -> tuple[TrialRun, ...]:
        """Every run read, an edge's repeated trials too (what a page draws)."""
        return tuple(self.edge.runs) if self.edge is not None else self.runs

    def facts(self) -> SideFacts:
        return SideFacts(
            path=str(self.path),
            kind=self.kind,
            runs=[r.manifest.run_id for r in self.runs],
            rates=[r.manifest.rate for r in self.runs],
        )


def read_compare_side(path: Path, label: str) -> CompareSide:
    """Read ``path`` as a side; ReadError names it when it is none of the three."""
    if is_edge_folder(path):
        edge = read_edge(path)
        # a trial whose client fell behind was repeated by the search and never judged: its
        # repeat (or the bracket) speaks for that rate
        kept = tuple(r for r in edge.runs if r.summary.client_schedule_valid)
        return CompareSide(label, path, "edge", kept or tuple(edge.runs), edge)
    if is_run_folder(path):
        return CompareSide(label, path, "run", (read_run(path),), None)
    if path.is_dir() and not path.is_symlink():
        runs = tuple(read_run(p) for p in sorted(path.iterdir()) if is_run_folder(p))
        if runs:
            return CompareSide(label, path, "runs", runs, None)
    what = (
        "does not exist"
        if not path.exists()
        else "is not a run folder, an edge folder or a folder of run folders"
    )
    raise ReadError(f"{label} {path} {what}")


def check_comparable(a: CompareSide, b: CompareSide, *, allow_different_workloads: bool) -> bool:
    """Refuse (NotComparableError) sides that are not comparable; True when their workloads
    differ and that was allowed."""
    for side in (a, b):
        for run in side.runs:
            if not run.summary.client_schedule_valid:
                raise NotComparableError(
                    f"{side.label} {run.path}: the client did not keep its schedule (summary.json "
                    "client_schedule_valid is false): its latencies are not the fleet's"
                )
    first_a, first_b = a.runs[0].manifest, b.runs[0].manifest
    for side, first in ((a, first_a), (b, first_b)):
        for run in side.runs[1:]:
            _same_target(side.label, first, side.label, run.manifest, run.path)
    _same_target("A", first_a, "B", first_b, b.runs[0].path)
    differ = first_a.workload_digest != first_b.workload_digest
    if differ and not allow_different_workloads:
        raise NotComparableError(
            f"A and B ran different workloads: A {_workload(first_a)}, B {_workload(first_b)} "
            "(--allow-different-workloads compares them anyway)"
        )
    return differ


def _same_target(la: str, a: Manifest, lb: str, b: Manifest, where: Path) -> None:
    for name in ("ttft_s", "tpot_s", "attainment"):
        va, vb = getattr(a, name), getattr(b, name)
        if Decimal(va) != Decimal(vb):
            flag = {"ttft_s": "TTFT bound", "tpot_s": "TPOT bound", "attainment": "attainment"}
            raise NotComparableError(
                f"{la} and {lb} were judged by different targets: {flag[name]} {va} against "
                f"{vb} ({where})"
            )


def _workload(m: Manifest) -> str:
    return (
        f"{m.input_tokens}->{m.output_tokens} tokens, {m.workload_path} ({m.workload_digest[:12]})"
    )


def differences(a: CompareSide, b: CompareSide) -> list[Difference]:
    """What the two sides' first manifests disagree on: the engine's version (``GET /version``),
    the client's version and settings, the engines' launch records, the scheduler settings a
    frontend published, the fleet file, the served model, the base URL and the offered load."""
    ma, mb = a.runs[0].manifest, b.runs[0].manifest
    facts: list[tuple[str, str | None, str | None]] = [
        ("engine version", ma.server_version, mb.server_version),
        ("client version", ma.helper_version, mb.helper_version),
        ("client digest", ma.helper_digest[:12], mb.helper_digest[:12]),
        ("model", ma.model, mb.model),
        ("base URL", ma.base_url, mb.base_url),
        ("workload", _workload(ma), _workload(mb)),
        ("fleet file", _text(ma.arguments.get("fleet")), _text(mb.arguments.get("fleet"))),
        ("launch records", _launch(ma), _launch(mb)),
        ("client limits", ma.limits.model_dump_json(), mb.limits.model_dump_json()),
        ("event loop", ma.event_loop, mb.event_loop),
        (
            "frontend scheduler",
            _json_or_none(ma.frontend_scheduler),
            _json_or_none(mb.frontend_scheduler),
        ),
        ("requests per run", _ints(a, "requests"), _ints(b, "requests")),
        ("rates", _rates(a), _rates(b)),
    ]
    return [Difference(what=w, a=x, b=y) for w, x, y in facts if x != y]


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def _launch(m: Manifest) -> str | None:
    return ", ".join(sorted(r.sha256[:12] for r in m.launch_records)) or None


def _json_or_none(model: object) -> str | None:
    dump = getattr(model, "model_dump_json", None)
    return None if dump is None else str(dump())


def _ints(side: CompareSide, field: str) -> str:
    return ", ".join(str(getattr(r.manifest, field)) for r in side.runs)


def _rates(side: CompareSide) -> str:
    return ", ".join(f"{r.manifest.rate:g}" for r in side.runs)
