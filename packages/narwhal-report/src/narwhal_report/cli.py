"""``narwhal-report PATH… --out report.html``: a thin typer shell over :func:`write_report`.

Errors are one line ``narwhal-report: error: …``: exit 2 for bad input (a missing path, one that
is neither a profile store nor a trial run folder, an unusable --out), 1 for a blocking error, 130
when interrupted. Nothing is written on failure. ``--version`` prints the installed distribution's
version (from its metadata).
"""

from __future__ import annotations

import sys
from importlib import metadata
from pathlib import Path
from typing import Annotated

import typer

from narwhal_report._errors import ReportError
from narwhal_report._report import write_report

PROG = "narwhal-report"
DISTRIBUTION = "narwhal-report"


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"{PROG} ({DISTRIBUTION}) {metadata.version(DISTRIBUTION)}")
        raise typer.Exit(0)


def _command(
    paths: Annotated[
        list[Path],
        typer.Argument(
            help="Profile stores (their .samples.json sidecar beside them), trial "
            "run folders and edge folders (load_trial.py edge), one or many.",
            show_default=False,
            metavar="PATH",
        ),
    ],
    out: Annotated[Path, typer.Option("--out", help="The HTML file to write (0600).")],
    fleet: Annotated[
        Path | None,
        typer.Option(
            "--fleet",
            help="The fleet file the stores were profiled for (default: a "
            "fleet.json beside a store or one folder up with the store's fleet SHA-256).",
        ),
    ] = None,
    kv_transfer: Annotated[
        float,
        typer.Option(
            "--kv-transfer-s-per-token",
            min=0.0,
            help="For the predicted curve: seconds "
            "per prompt token to move a split request's KV (as predict's option).",
        ),
    ] = 0.0,
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            is_eager=True,
            callback=_version_callback,
            help="Print the installed distribution version.",
        ),
    ] = False,
) -> None:
    """Profiles and trials as one offline HTML page: fits, CDFs, timelines, attainment against
    rate with the prediction, measured edges beside the predicted band. No engine is contacted."""
    del version  # handled by its eager callback
    written = write_report(paths, out, fleet=fleet, kv_transfer_s_per_token=kv_transfer)
    print(f"wrote report to {written}")


def main(argv: list[str] | None = None) -> None:
    """Entry point of ``narwhal-report``, and its one shell: a ``ReportError`` is its exit code
    and one line, a usage error typer finds itself is one line and exit 2, Ctrl-C exit 130."""
    args = list(sys.argv[1:] if argv is None else argv)
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
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
