"""The ``narwhal-profile`` command: a thin typer shell over the modes (docs/design.md §8).

Only this layer turns errors into exit codes and one-line messages (or the JSON result).
"""

from __future__ import annotations

import contextlib
import inspect
import os
import sys
import traceback
from collections.abc import Sequence
from dataclasses import fields
from importlib import metadata
from typing import Annotated, Any, get_type_hints

import typer

from narwhal_profile_cli._command_line import RawOptions
from narwhal_profile_cli._errors import ProfileError, ProfileInterrupted, ProfileUsageError
from narwhal_profile_cli._options import OutputFormat, validate
from narwhal_profile_cli.results._result import DISTRIBUTION, PROG, CommandResult, emit


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"{PROG} ({DISTRIBUTION}) {metadata.version(DISTRIBUTION)}")
        raise typer.Exit(0)


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


def profile(**given: Any) -> None:
    """Measure live engines into the fleet's profiles.path, refit TTFT, or merge role mixes."""
    del given["version"]
    raw = RawOptions(**given)
    result = CommandResult()
    fmt: OutputFormat = "json" if raw.output_format == "json" else "text"
    try:
        options = validate(raw, os.environ)  # only --shard auto reads it
        # The modes (httpx, numpy, scipy, pydantic) load only now: --version and --help stay fast.
        from narwhal_profile_cli._run import execute

        execute(options, result, stderr=sys.stderr)
    except ProfileError as exc:
        result.error = exc
    except KeyboardInterrupt:  # outside a live sweep, which reports its kept profiles itself
        result.error = ProfileInterrupted("interrupted")
    except Exception as exc:
        traceback.print_exc(file=sys.stderr)
        result.error = ProfileError(
            f"unexpected {type(exc).__name__}: {exc}", code="internal_error"
        )
    raise typer.Exit(emit(result, fmt, stdout=sys.stdout, stderr=sys.stderr))


def _parameters() -> inspect.Signature:
    """``profile``'s parameters as typer reads them: each field of ``RawOptions`` (its typer
    declaration and default), then ``--version``."""
    hints = get_type_hints(RawOptions, include_extras=True)
    options = [
        inspect.Parameter(
            option.name,
            inspect.Parameter.KEYWORD_ONLY,
            default=option.default,
            annotation=hints[option.name],
        )
        for option in fields(RawOptions)
    ]
    return inspect.Signature([*options, _VERSION])


def _wants_json(args: Sequence[str]) -> bool:
    """Whether the command line asks for ``--format json`` (used for errors typer raises itself)."""
    for index, arg in enumerate(args):
        if arg == "--format=json" or (
            arg == "--format" and index + 1 < len(args) and args[index + 1] == "json"
        ):
            return True
    return False


def run(argv: Sequence[str] | None = None) -> int:
    """Run the command with ``argv`` (default: ``sys.argv[1:]``) and return the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None)
    # typer reads the parameters from the signature: built here, not when the module is imported
    profile.__signature__ = _parameters()  # type: ignore[attr-defined]
    app.command(context_settings={"help_option_names": ["-h", "--help"]})(profile)
    command = typer.main.get_command(app)
    try:
        code = command.main(args, prog_name=PROG, standalone_mode=False)
    except typer.TyperException as exc:  # usage errors raised by typer itself (unknown option, ...)
        error = ProfileUsageError(exc.format_message())
        return emit(
            CommandResult(error=error),
            "json" if _wants_json(args) else "text",
            stdout=sys.stdout,
            stderr=sys.stderr,
        )
    except typer.Abort:
        return 130
    return code if isinstance(code, int) else 0


def main() -> None:
    """Console-script entry point: run, flush, and exit without the interpreter's teardown.

    Every output is written (atomically) and every stream closed by then; unloading numpy, scipy
    and a sweep's objects only added 0.15-0.3 s to the operator's wait. ``run`` is the
    entry for callers that stay in the process.
    """
    code = run()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe or stream: nothing to flush
            stream.flush()
    os._exit(code)
