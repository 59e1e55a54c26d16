"""Unit tests of the private run folder and its files."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from narwhal_trial import OutputPathError
from narwhal_trial._files import atomic_write, create_exclusive, make_private_dir

HOLDS = ("manifest.json", "requests.jsonl", "summary.json")


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_new_folder_and_files_are_private(tmp_path: Path) -> None:
    """The run folder is 0700 and its files 0600, whatever the umask."""
    out = tmp_path / "runs" / "rate-1"
    make_private_dir(out, holds=HOLDS)
    assert _mode(out) == 0o700
    atomic_write(out / "summary.json", b"{}")
    assert _mode(out / "summary.json") == 0o600
    fd = create_exclusive(out / "requests.jsonl")
    assert _mode(out / "requests.jsonl") == 0o600
    os.close(fd)
    with pytest.raises(FileExistsError):
        create_exclusive(out / "requests.jsonl")


@pytest.mark.parametrize("umask", [0o000, 0o022])
def test_missing_parents_are_private_too(tmp_path: Path, umask: int) -> None:
    """Every folder the trial creates is 0700, intermediate parents included; an existing parent
    keeps its mode."""
    tmp_path.chmod(0o755)
    out = tmp_path / "runs" / "2026" / "load-trial" / "rate-1"
    old = os.umask(umask)
    try:
        make_private_dir(out, holds=HOLDS)
    finally:
        os.umask(old)
    for folder in (out, *list(out.parents)[:3]):
        assert _mode(folder) == 0o700, folder
    assert _mode(tmp_path) == 0o755


def test_existing_results_symlinks_and_files_are_refused(tmp_path: Path) -> None:
    """A folder holding a run, a symlink or a plain file is refused and left as it was."""
    out = tmp_path / "rate-1"
    out.mkdir()
    (out / "summary.json").write_text("{}")
    with pytest.raises(OutputPathError, match=r"already holds summary\.json"):
        make_private_dir(out, holds=HOLDS)
    assert (out / "summary.json").read_text() == "{}"
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(OutputPathError, match="symlink"):
        make_private_dir(link, holds=HOLDS)
    assert not (tmp_path / "elsewhere").exists()
    plain = tmp_path / "plain"
    plain.write_text("x")
    with pytest.raises(OutputPathError, match="not a folder"):
        make_private_dir(plain, holds=HOLDS)


def test_empty_existing_folder_is_taken_over(tmp_path: Path) -> None:
    """An empty folder (as mktemp -d makes) is accepted and made private."""
    out = tmp_path / "empty"
    out.mkdir(mode=0o755)
    make_private_dir(out, holds=HOLDS)
    assert _mode(out) == 0o700


def test_atomic_write_refuses_a_symlinked_destination(tmp_path: Path) -> None:
    """A destination that is a symlink is never followed."""
    target = tmp_path / "target"
    target.write_text("keep")
    (tmp_path / "summary.json").symlink_to(target)
    with pytest.raises(OSError, match="symlink"):
        atomic_write(tmp_path / "summary.json", b"{}")
    assert target.read_text() == "keep"
