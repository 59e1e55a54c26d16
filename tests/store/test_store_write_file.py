"""``write_file_atomic``: one file written whole or not at all, private, never through a symlink."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from narwhal_store import DestinationError, write_file_atomic


def test_writes_private_and_replaces(tmp_path: Path) -> None:
    """A new file is 0600; a second write replaces it; no temporary file stays."""
    path = tmp_path / "page.html"
    write_file_atomic(path, b"one")
    assert path.read_bytes() == b"one"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    write_file_atomic(path, b"two")
    assert path.read_bytes() == b"two"
    assert [p.name for p in tmp_path.iterdir()] == ["page.html"]


def test_refuses_symlink_destination(tmp_path: Path) -> None:
    """A symlink at the destination is refused, its target untouched."""
    target = tmp_path / "target"
    target.write_bytes(b"keep")
    link = tmp_path / "link"
    link.symlink_to(target)
    with pytest.raises(DestinationError, match="symlink"):
        write_file_atomic(link, b"x")
    assert target.read_bytes() == b"keep" and link.is_symlink()


def test_refuses_missing_or_symlinked_folder(tmp_path: Path) -> None:
    """The folder must exist and must not be a symlink; nothing is created."""
    with pytest.raises(DestinationError):
        write_file_atomic(tmp_path / "missing" / "f", b"x")
    assert not (tmp_path / "missing").exists()
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "alias").symlink_to(real)
    with pytest.raises(DestinationError, match="symlink"):
        write_file_atomic(tmp_path / "alias" / "f", b"x")
    assert list(real.iterdir()) == []


def test_refuses_a_folder_destination(tmp_path: Path) -> None:
    """A destination that is a folder is not a regular file."""
    (tmp_path / "d").mkdir()
    with pytest.raises(DestinationError, match="not a regular file"):
        write_file_atomic(tmp_path / "d", b"x")
