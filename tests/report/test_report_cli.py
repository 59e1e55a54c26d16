"""``narwhal-report`` as a subprocess: the file it writes, and every bad input as one line, the
right exit code and nothing written."""

from __future__ import annotations

import stat
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from .conftest import Cli


def _one_error_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("narwhal-report: error: "), stderr
    assert "Traceback" not in stderr
    return lines[0]


def test_writes_a_private_page_and_says_where(cli: Cli, inputs: dict[str, Path],
                                              tmp_path: Path) -> None:  # fmt: skip
    """Exit 0, ``wrote report to PATH`` and a 0600 HTML file holding both trials (and the
    sweep's Monte Carlo at the replications asked)."""
    out = tmp_path / "report.html"
    proc = cli(str(inputs["store"]), str(inputs["pass"]), str(inputs["miss"]), "--replications",
               "5", "--out", str(out))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"wrote report to {out}"
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>") and 'id="trial-2-rate-4"' in page
    assert "at each measured rate (5 replications, seed 0)" in page
    assert [p.name for p in tmp_path.iterdir()] == ["report.html"]  # no temporary file left


def test_version_prints_the_installed_distribution(cli: Cli) -> None:
    """``--version`` (even with no PATH and no --out) prints ``narwhal-report (narwhal-report)
    VERSION`` from the installed metadata and exits 0; ``python -m narwhal_report`` does too."""
    expected = f"narwhal-report (narwhal-report) {metadata.version('narwhal-report')}"
    proc = cli("--version")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == expected
    module = subprocess.run(
        [sys.executable, "-m", "narwhal_report", "--version"],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert module.returncode == 0, module.stderr
    assert module.stdout.strip() == expected


def test_help_lists_the_command(cli: Cli) -> None:
    """``--help`` (and no argument at all) describe PATH, --out and --fleet."""
    for args in (("--help",), ()):
        proc = cli(*args)
        assert proc.returncode == 0
        assert "--out" in proc.stdout and "--fleet" in proc.stdout and "PATH" in proc.stdout


def test_missing_path_is_exit_2_and_writes_nothing(cli: Cli, tmp_path: Path) -> None:
    """A path that does not exist: exit 2, one line naming it, no file."""
    out = tmp_path / "report.html"
    proc = cli(str(tmp_path / "nope"), "--out", str(out))
    assert proc.returncode == 2
    assert "nope: no such file or folder" in _one_error_line(proc.stderr)
    assert not out.exists()


def test_neither_store_nor_run_is_exit_2(cli: Cli, tmp_path: Path,
                                         inputs: dict[str, Path]) -> None:  # fmt: skip
    """A folder without manifest.json, and a JSON file that is not a store: exit 2, nothing
    written; an existing report is left as it was."""
    out = tmp_path / "report.html"
    out.write_text("earlier")
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = cli(str(empty), "--out", str(out))
    assert proc.returncode == 2
    assert "neither a profile store nor a trial run folder" in _one_error_line(proc.stderr)
    summary = inputs["pass"] / "summary.json"
    proc = cli(str(summary), "--out", str(out))
    assert proc.returncode == 2
    assert "not a readable profile store" in _one_error_line(proc.stderr)
    assert out.read_text() == "earlier"


def test_broken_run_folder_is_exit_2(cli: Cli, tmp_path: Path) -> None:
    """A run folder whose summary.json is missing: exit 2 naming the file."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "manifest.json").write_text("{}")
    proc = cli(str(run), "--out", str(tmp_path / "r.html"))
    assert proc.returncode == 2
    assert "not a readable trial run" in _one_error_line(proc.stderr)
    assert not (tmp_path / "r.html").exists()


def test_unwritable_out_is_exit_2(cli: Cli, tmp_path: Path, inputs: dict[str, Path]) -> None:
    """--out in a missing folder, a folder, or a symlink: exit 2, nothing written or followed."""
    target = tmp_path / "target.html"
    link = tmp_path / "link.html"
    link.symlink_to(target)
    for out, words in (
        (tmp_path / "missing" / "r.html", "does not exist"),
        (tmp_path, "not a regular file"),
        (link, "symlink"),
    ):
        proc = cli(str(inputs["pass"]), "--out", str(out))
        assert proc.returncode == 2, out
        assert words in _one_error_line(proc.stderr)
    assert not target.exists() and not (tmp_path / "missing").exists()


def test_bad_fleet_is_exit_2(cli: Cli, tmp_path: Path, inputs: dict[str, Path]) -> None:
    """--fleet that does not exist: exit 2."""
    proc = cli(str(inputs["store"]), "--fleet", str(tmp_path / "nofleet.json"), "--out",
               str(tmp_path / "r.html"))  # fmt: skip
    assert proc.returncode == 2
    assert "--fleet" in _one_error_line(proc.stderr)
    assert not (tmp_path / "r.html").exists()


def test_unknown_option_is_one_line(cli: Cli, tmp_path: Path) -> None:
    """Typer's own usage errors are one line and exit 2 too."""
    proc = cli("--bogus", "--out", str(tmp_path / "r.html"))
    assert proc.returncode == 2
    _one_error_line(proc.stderr)
