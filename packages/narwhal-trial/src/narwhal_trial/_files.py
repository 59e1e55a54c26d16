"""Private, symlink-safe files: run folders 0700, files 0600, atomic replaces, exclusive creates."""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path
from typing import Any

import orjson

from narwhal_store import (
    PathAccessError,
    StoreError,
    creation_problem,
    lstat_or_none,
    write_file_atomic,
)
from narwhal_trial._errors import OutputPathError

DIR_MODE = 0o700
FILE_MODE = 0o600
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def read_regular(path: Path) -> bytes:
    """Read a regular file without following a symlink at its last component."""
    fd = os.open(path, os.O_RDONLY | _NOFOLLOW | _CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise IsADirectoryError(f"{path} is not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as fh:
            return fh.read()
    finally:
        os.close(fd)


def _reach(path: Path, flag: str) -> os.stat_result | None:
    """``lstat_or_none`` for a destination: a failure is an OutputPathError naming the path."""
    try:
        return lstat_or_none(path)
    except PathAccessError as exc:
        raise OutputPathError(f"refusing {flag} {path}: {exc.reason}") from exc


def _creatable_in(path: Path, flag: str) -> None:
    """Refuse (OutputPathError) a ``path`` that does not exist yet and could not be created where
    it is asked for (``narwhal_store.creation_problem``)."""
    try:
        problem = creation_problem(path)
    except PathAccessError as exc:
        raise OutputPathError(f"refusing {flag} {path}: {exc.reason}") from exc
    if problem is not None:
        raise OutputPathError(f"refusing {flag} {path}: {problem}")


def check_fresh_dir(path: Path, *, holds: tuple[str, ...], flag: str = "--out") -> bool:
    """Refuse (OutputPathError) a destination that is a symlink, not a folder, not empty, or
    that cannot be reached or created (a folder on its way that cannot be entered or written).

    Returns True when an empty folder is already there. ``holds`` names the files a finished result
    would have, for the message. Nothing is changed.
    """
    info = _reach(path, flag)
    if info is None:
        _creatable_in(path, flag)
        return False
    if stat.S_ISLNK(info.st_mode):
        raise OutputPathError(f"refusing {flag} {path}: it is a symlink")
    if not stat.S_ISDIR(info.st_mode):
        raise OutputPathError(f"refusing {flag} {path}: it exists and is not a folder")
    try:
        present = sorted(p.name for p in path.iterdir())
    except OSError as exc:
        raise OutputPathError(
            f"refusing {flag} {path}: cannot list it ({exc.strerror or exc})"
        ) from exc
    if present:
        found = [name for name in holds if name in present]
        what = f"already holds {', '.join(found)}" if found else "is not empty"
        raise OutputPathError(f"refusing {flag} {path}: it {what}; choose a new folder")
    if not os.access(path, os.W_OK | os.X_OK):
        raise OutputPathError(f"refusing {flag} {path}: the folder is not writable")
    return True


def check_fresh_file(path: Path, *, flag: str) -> None:
    """Refuse (OutputPathError) a new file's destination that already exists (a symlink too), or
    that cannot be reached or created. Nothing is changed."""
    if _reach(path, flag) is not None:
        raise OutputPathError(f"refusing {flag} {path}: it already exists")
    _creatable_in(path, flag)


def make_private_dir(path: Path, *, holds: tuple[str, ...]) -> None:
    """Create ``path`` as a 0700 folder, or take over an existing empty one (made 0700). Missing
    parents are created 0700 too, whatever the umask; existing ones are left as they are.

    Everything check_fresh_dir refuses is refused here too, and left untouched.
    """
    if check_fresh_dir(path, holds=holds):
        path.chmod(DIR_MODE, follow_symlinks=False)
        return
    missing = [p for p in reversed(path.parents) if not p.exists()]
    try:
        for folder in missing:
            with contextlib.suppress(FileExistsError):  # made by someone else meanwhile: not ours
                folder.mkdir(mode=DIR_MODE)
                folder.chmod(DIR_MODE, follow_symlinks=False)
        path.mkdir(mode=DIR_MODE)
        path.chmod(DIR_MODE, follow_symlinks=False)
    except FileExistsError as exc:
        raise OutputPathError(f"refusing --out {path}: it appeared while starting") from exc
    except OSError as exc:
        raise OutputPathError(f"cannot create --out {path}: {exc.strerror or exc}") from exc


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically, mode 0600 (``narwhal_store.write_file_atomic``: temp
    file beside it, fsync, rename, fsync of the folder).

    A destination that is a symlink is refused rather than followed or replaced; every refusal or
    failure is an ``OSError`` naming the file, as the callers expect.
    """
    try:
        write_file_atomic(path, data, mode=FILE_MODE)
    except StoreError as exc:
        raise OSError(str(exc)) from exc


def create_exclusive(path: Path) -> int:
    """Create a new 0600 file for appending; fails if anything is already there."""
    return os.open(
        path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | _NOFOLLOW | _CLOEXEC, FILE_MODE
    )


def document_bytes(doc: Any) -> bytes:
    """A run folder's JSON document as written: orjson, indented, keys sorted, one final newline."""
    return orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"
