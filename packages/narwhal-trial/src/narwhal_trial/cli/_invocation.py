"""What the command layer knows of its own invocation: the program name its one-line errors
start with, the command line the manifest records, and the launcher's path (for the helper
digest), and the one shell that turns errors into exit codes. ``main`` builds it once; every
subcommand, ``edge``'s included, reads it from typer's context."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import typer

from narwhal_trial._errors import TrialError
from narwhal_trial.cli._commands import fail


@dataclass(frozen=True, slots=True)
class Invocation:
    """How the command was invoked."""

    prog: str
    argv: tuple[str, ...]
    launcher: Path | None

    @contextlib.contextmanager
    def errors(self) -> Iterator[None]:
        """The command layer's one shell: a ``TrialError`` becomes its exit code and one line on
        stderr, Ctrl-C exit 130 (what a command had written keeps what it found)."""
        try:
            yield
        except TrialError as exc:
            raise typer.Exit(fail(self.prog, exc)) from exc
        except KeyboardInterrupt:
            raise typer.Exit(130) from None
