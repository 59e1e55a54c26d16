"""``narwhal-report PATH… --out report.html`` and ``narwhal-report --compare A B --out
page.html``: a thin typer shell over :func:`write_report` and :func:`write_comparison`.

Errors are one line ``narwhal-report: error: …``: exit 2 for bad input (a missing path, one that
is neither a profile store, a freshness probe nor a trial run folder, an unreadable one, an
unusable --out, ``--compare`` without its two paths or beside PATHs, sides compare refuses), 1
for a blocking error, 130 when interrupted.
Nothing is written on failure. ``--version`` prints the installed distribution's version (from its
metadata).
"""

from __future__ import annotations

import dataclasses
import inspect
import sys
from dataclasses import dataclass, replace
from importlib import metadata
from pathlib import Path
from typing import Annotated, Any, get_type_hints

import typer

from narwhal_report._errors import ReportError, ReportUsageError
from narwhal_report._report import write_comparison, write_report
from narwhal_report._sweep_spread import MAX_REPLICATIONS, REPLICATIONS
from narwhal_trial import CompareRequest

PROG = "narwhal-report"
DISTRIBUTION = "narwhal-report"


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"{PROG} ({DISTRIBUTION}) {metadata.version(DISTRIBUTION)}")
        raise typer.Exit(0)


def _two_paths(value: tuple[Path, Path] | None) -> tuple[Path, Path] | None:
    """``--compare``'s two values, refusing an option taken for the second path (``--compare A
    --out F``: click hands over the next two words, whatever they are)."""
    if value is not None and any(str(v).startswith("-") for v in value):
        raise typer.BadParameter("takes two paths, A and B")
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class ReportOptions:
    """Every option of ``narwhal-report``, declared once (each annotation carries its typer
    declaration, as the other commands' options do), and checked together: the report and the
    comparison page take different inputs, so a mix is refused, not half obeyed."""

    out: Annotated[Path, typer.Option("--out", help="The HTML file to write (0600).")]
    paths: Annotated[
        list[Path] | None,
        typer.Argument(
            help="Profile stores (their .samples.json sidecar beside them), freshness probes "
            "(narwhal-profile --verify), trial run folders and edge folders (load_trial.py "
            "edge), one or many.",
            show_default=False,
            metavar="PATH",
        ),
    ] = None
    fleet: Annotated[
        Path | None,
        typer.Option(
            "--fleet",
            help="The fleet file the stores were profiled for (default: a "
            "fleet.json beside a store or one folder up with the store's fleet SHA-256).",
        ),
    ] = None
    kv_transfer: Annotated[
        float,
        typer.Option(
            "--kv-transfer-s-per-token",
            min=0.0,
            help="For the predicted curve: seconds "
            "per prompt token to move a split request's KV (as predict's option).",
        ),
    ] = 0.0
    replications: Annotated[
        int | None,
        typer.Option(
            "--replications",
            min=1,
            max=MAX_REPLICATIONS,
            show_default=False,
            help="Monte Carlo replications of the prediction at each measured rate of a sweep "
            f"(default {REPLICATIONS}; 1: none, the curve of the fits alone).",
        ),
    ] = None
    compare: Annotated[
        tuple[Path, Path] | None,
        typer.Option(
            "--compare",
            metavar="A B",
            callback=_two_paths,
            show_default=False,
            help="Instead of PATH…: a page comparing two deployments as `narwhal-trial compare A "
            "B` judges them (A the baseline, B the change; each a run folder, an edge folder or a "
            "folder of run folders): the verdicts, both sides' TTFT and TPOT distributions and "
            "attainment against rate.",
        ),
    ] = None
    confidence: Annotated[
        float | None,
        typer.Option(
            "--confidence",
            show_default=False,
            help="With --compare: of every interval, 0.5 to 0.999 (default 0.95).",
        ),
    ] = None
    seed: Annotated[
        int | None,
        typer.Option(
            "--seed",
            min=0,
            show_default=False,
            help="With --compare: seed of the bootstrap (default 0).",
        ),
    ] = None
    allow_different_workloads: Annotated[
        bool,
        typer.Option(
            "--allow-different-workloads",
            help="With --compare: compare runs of different workload files.",
        ),
    ] = False

    def request(self) -> CompareRequest | None:
        """The comparison asked for, or None for the report; ``ReportUsageError`` when the
        options mix the two, or give neither."""
        if self.compare is None:
            alone = [
                flag
                for flag, given in (
                    ("--confidence", self.confidence is not None),
                    ("--seed", self.seed is not None),
                    ("--allow-different-workloads", self.allow_different_workloads),
                )
                if given
            ]
            if alone:
                raise ReportUsageError(f"{', '.join(alone)}: only with --compare A B")
            if not self.paths:
                raise ReportUsageError(
                    "give PATH… (profile stores, freshness probes, trial run folders, edge "
                    "folders) or --compare A B"
                )
            return None
        if self.paths:
            given = " ".join(map(str, self.paths))
            raise ReportUsageError(f"--compare A B takes no PATH beside it (got {given})")
        if self.fleet is not None or self.kv_transfer or self.replications is not None:
            raise ReportUsageError(
                "--fleet, --kv-transfer-s-per-token and --replications: not with --compare"
            )
        a, b = self.compare
        request = CompareRequest(
            a, b, seed=self.seed or 0, allow_different_workloads=self.allow_different_workloads
        )
        if self.confidence is not None:
            request = replace(request, confidence=self.confidence)
        return request


_VERSION = inspect.Parameter(
    "version",
    inspect.Parameter.KEYWORD_ONLY,
    default=False,
    annotation=Annotated[
        bool,
        typer.Option(
            "--version",
            is_eager=True,
            callback=_version_callback,
            help="Print the installed distribution version.",
        ),
    ],
)


def _parameters() -> inspect.Signature:
    """The command's parameters as typer reads them: each field of ``ReportOptions`` (its typer
    declaration and default), then ``--version``."""
    hints = get_type_hints(ReportOptions, include_extras=True)
    return inspect.Signature(
        [
            *(
                inspect.Parameter(
                    field.name,
                    inspect.Parameter.KEYWORD_ONLY,
                    default=inspect.Parameter.empty
                    if field.default is dataclasses.MISSING
                    else field.default,
                    annotation=hints[field.name],
                )
                for field in dataclasses.fields(ReportOptions)
            ),
            _VERSION,
        ]
    )


def _command(**given: Any) -> None:
    """Profiles, freshness probes and trials as one offline HTML page: fits, drift, CDFs,
    timelines, attainment against rate with the prediction and its sources of spread, measured
    edges beside the predicted band; or (--compare A B) two
    deployments' verdicts and distributions side by side. No engine is contacted."""
    del given["version"]  # handled by its eager callback
    options = ReportOptions(**given)
    request = options.request()
    if request is None:
        written = write_report(
            options.paths or [],
            options.out,
            fleet=options.fleet,
            kv_transfer_s_per_token=options.kv_transfer,
            replications=options.replications or REPLICATIONS,
        )
    else:
        written = write_comparison(request, options.out)
    print(f"wrote report to {written}")


def main(argv: list[str] | None = None) -> None:
    """Entry point of ``narwhal-report``, and its one shell: a ``ReportError`` is its exit code
    and one line, a usage error typer finds itself is one line and exit 2, Ctrl-C exit 130."""
    args = list(sys.argv[1:] if argv is None else argv)
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    # typer reads the parameters from the signature: built here, not when the module is imported
    _command.__signature__ = _parameters()  # type: ignore[attr-defined]
    app.command()(_command)
    command = typer.main.get_command(app)
    try:
        code = command.main(args=args or ["--help"], prog_name=PROG, standalone_mode=False)
    except ReportError as exc:
        print(f"{PROG}: error: {exc.message}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except typer.TyperException as exc:
        print(f"{PROG}: error: {' '.join(exc.format_message().split())}", file=sys.stderr)
        sys.exit(2)
    except (typer.Abort, KeyboardInterrupt):
        print(f"{PROG}: interrupted; nothing written", file=sys.stderr)
        sys.exit(130)
    sys.exit(code if isinstance(code, int) else 0)
