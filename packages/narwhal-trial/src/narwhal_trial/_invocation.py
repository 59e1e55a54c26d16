"""What the command layer knows of its own invocation: the program name its one-line errors
start with, the command line the manifest records, and the launcher's path (for the helper
digest). ``cli`` builds it once; every subcommand, ``edge``'s included, reads it from typer's
context."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class Invocation:
    """How the command was invoked."""

    prog: str
    argv: tuple[str, ...]
    launcher: Path | None
