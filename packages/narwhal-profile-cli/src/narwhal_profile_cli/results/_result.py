"""The command's result (docs/design.md §8): success lines, or one ``narwhal.profile.result``.

A probe (``--verify``) that finds an engine drifted is no error: its document is written and the
command exits 3, the judged outcome, with one stderr line per drifted engine.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import orjson

from narwhal_profile_cli._errors import ProfileError
from narwhal_profile_cli._options import OutputFormat

if TYPE_CHECKING:  # pydantic is loaded once a mode runs, never for --version or --help
    from narwhal_store import ProbeDocument

RESULT_FORMAT = "narwhal.profile.result"
RESULT_FORMAT_VERSION = 1
PROG = "narwhal-profile"
DRIFTED_EXIT = 3
"""The exit code of a probe that found an engine drifted past the threshold."""
DISTRIBUTION = "narwhal-profile-cli"


@dataclass(slots=True)
class CommandResult:
    """What one invocation did: mode (None before one is chosen), paths, profiles, error."""

    mode: str | None = None
    path: Path | None = None
    samples_path: Path | None = None
    profiles: int = 0
    fits: list[dict[str, Any]] = field(default_factory=list)
    error: ProfileError | None = None
    probe: ProbeDocument | None = None
    """``verify``: the probe document written to ``path``."""

    @property
    def ok(self) -> bool:
        """True when the command succeeded."""
        return self.error is None

    @property
    def drifted(self) -> bool:
        """A probe found at least one engine past its threshold."""
        return self.probe is not None and bool(self.probe.drifted())

    @property
    def exit_code(self) -> int:
        """The error's exit code; else 3 when a probe found an engine drifted; else 0."""
        if self.error is not None:
            return self.error.exit_code
        return DRIFTED_EXIT if self.drifted else 0

    def to_document(self) -> dict[str, Any]:
        """The versioned JSON result."""
        error = None
        if self.error is not None:
            error = {
                "code": self.error.code,
                "message": self.error.message,
                "engine": self.error.engine,
            }
        doc = {
            "format": RESULT_FORMAT,
            "format_version": RESULT_FORMAT_VERSION,
            "ok": self.ok,
            "mode": self.mode,
            "path": None if self.path is None else str(self.path),
            "samples_path": None if self.samples_path is None else str(self.samples_path),
            "profiles": self.profiles,
            "fits": self.fits,
            "error": error,
        }
        if self.mode == "verify":  # the other modes' documents stay as they were
            doc["probe"] = None
            if self.probe is not None:
                from narwhal_profile_cli.results._probe_lines import probe_summary

                doc["probe"] = probe_summary(self.probe)
        return doc


def success_line(mode: str, profiles: int, path: Path) -> str:
    """The reference's success line for ``mode``."""
    if mode == "verify":
        return f"wrote the probe of {profiles} engine(s) to {path}"
    if mode == "refit":
        return f"refitted {profiles} profile(s) to {path}"
    if mode == "merge":
        return f"merged {profiles} measured profiles to {path}"
    return f"wrote {profiles} profile(s) to {path}"


def error_line(error: ProfileError) -> str:
    """One stderr line, ``narwhal-profile: error: …``, naming the engine when there is one."""
    message = " ".join(error.message.split())
    if error.engine is not None and error.engine not in message:
        message = f"engine {error.engine}: {message}"
    return f"{PROG}: error: {message}"


def emit(
    result: CommandResult, output_format: OutputFormat, *, stdout: TextIO, stderr: TextIO
) -> int:
    """Write the result in ``output_format`` and return the exit code."""
    if result.probe is not None and result.error is None:
        from narwhal_profile_cli.results._probe_lines import drift_warnings

        for line in drift_warnings(result.probe):  # the judged outcome, in every format
            stderr.write(f"{PROG}: drifted: {line}\n")
        stderr.flush()
    if output_format == "json":
        stdout.write(orjson.dumps(result.to_document()).decode("utf-8") + "\n")
        stdout.flush()
        return result.exit_code
    if result.error is not None:
        stderr.write(error_line(result.error) + "\n")
        stderr.flush()
    elif result.mode is not None and result.path is not None:
        from narwhal_profile_cli.results._quality import (
            fit_lines,  # deferred: keeps --version light
        )

        for line in fit_lines(result.fits):
            stdout.write(line + "\n")
        if result.probe is not None:
            from narwhal_profile_cli.results._probe_lines import probe_lines

            for line in probe_lines(result.probe):
                stdout.write(line + "\n")
        stdout.write(success_line(result.mode, result.profiles, result.path) + "\n")
        stdout.flush()
    return result.exit_code
