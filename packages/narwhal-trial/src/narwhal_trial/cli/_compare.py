"""The ``compare`` subcommand: its options, declared once as dataclass fields (``_declare``), and
the command body over ``compare._compare.compare``; ``_app`` registers it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from narwhal_trial._files import check_fresh_file
from narwhal_trial.cli._commands import write_document
from narwhal_trial.cli._invocation import Invocation
from narwhal_trial.compare._compare import DEFAULT_CONFIDENCE, CompareRequest, compare_sides
from narwhal_trial.compare._profiles import profile_comparer
from narwhal_trial.compare._text import render_text


@dataclass(frozen=True, slots=True, kw_only=True)
class CompareOptions:
    """What ``compare`` is given: the two sides, the confidence, the profile stores to compare
    too, and where the result goes."""

    a: Annotated[
        Path,
        typer.Argument(
            metavar="A",
            show_default=False,
            help="The baseline: a run folder, an edge folder (load_trial.py edge) or a folder of "
            "run folders at several rates.",
        ),
    ]
    b: Annotated[
        Path,
        typer.Argument(metavar="B", show_default=False, help="The change, as A."),
    ]
    confidence: Annotated[
        float,
        typer.Option(
            "--confidence",
            help="Of every interval; a difference is better or worse only when its interval "
            "excludes none (0.5 to 0.999).",
        ),
    ] = DEFAULT_CONFIDENCE
    seed: Annotated[
        int,
        typer.Option("--seed", min=0, help="Seed of the bootstrap (same seed, same intervals)."),
    ] = 0
    allow_different_workloads: Annotated[
        bool,
        typer.Option(
            "--allow-different-workloads",
            help="Compare runs of different workload files (shape or seed); refused otherwise.",
        ),
    ] = False
    profiles: Annotated[
        tuple[Path, Path] | None,
        typer.Option(
            "--profiles",
            metavar="STORE_A STORE_B",
            show_default=False,
            help="Also compare two profile stores (each with its .samples.json beside it): each "
            "engine both profiled, B's fitted TTFT and TPOT against A's at the points both "
            "measured.",
        ),
    ] = None
    json_out: Annotated[
        bool, typer.Option("--json", help="Print the JSON document instead of the text.")
    ] = False
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Also write the JSON document to this new file."),
    ] = None

    def request(self) -> CompareRequest:
        """The library's input (``compare_sides`` checks the confidence)."""
        return CompareRequest(
            a=self.a,
            b=self.b,
            confidence=self.confidence,
            seed=self.seed,
            allow_different_workloads=self.allow_different_workloads,
            profiles=None if self.profiles is None else profile_comparer(*self.profiles),
        )


def compare_command(options: CompareOptions) -> tuple[int, str]:
    """Compare; returns the exit code (0 nothing got worse, 2 something did) and the text (or
    the JSON document). Writes ``--out`` (a fresh path) atomically, whatever the verdict."""
    if options.out is not None:
        check_fresh_file(options.out, flag="--out")
    doc = compare_sides(options.request())
    data = write_document(doc, options.out)
    return doc.exit_code, (data if options.json_out else render_text(doc))


def compare_shell(ctx: typer.Context, options: CompareOptions) -> None:
    """Compare two deployments' trials: A (the baseline) against B. Each side is a run folder,
    an edge folder or a folder of run folders; runs pair by offered rate. Per pair: the
    attainment difference (Newcombe's interval) and the TTFT and TPOT p50 and p99 shifts
    (bootstrap over requests); two edges: whether their brackets separate; with --profiles, each
    engine's fits at the points both sweeps measured (the ratio B/A, its interval from the raw
    samples). Each says better, worse or no detectable difference, with the smallest difference
    the samples detect. Exit 0 when nothing got worse, 2 when something did, 1 when the sides
    are not comparable (different workloads or targets, an invalid schedule, profile stores
    without an engine in common) or cannot be read."""
    inv: Invocation = ctx.obj
    with inv.errors():
        code, text = compare_command(options)
    print(text)
    raise typer.Exit(code)
