"""Looking at a path an operator named, before anything is read or written.

Every command takes paths, and a folder on the way that cannot be entered must be one line naming
the path, never a traceback. ``lstat_or_none`` says what is there (nothing, or the entry itself,
not following a symlink); ``creation_problem`` says why a file or folder that does not exist yet
could not be created where it is asked for. Each caller puts its own flag and path in front of
``PathAccessError.reason`` or the problem, in its own error type.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from narwhal_store._errors import PathAccessError

__all__ = ["creation_problem", "lstat_or_none"]


def lstat_or_none(path: Path) -> os.stat_result | None:
    """``path.lstat()``, None when nothing is there (also under a file: its parents tell); a path
    that cannot be looked at (a folder on its way that cannot be entered, a name too long) is a
    PathAccessError."""
    try:
        return path.lstat()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise PathAccessError(path, exc) from exc


def creation_problem(path: Path) -> str | None:
    """Why ``path`` (which does not exist) could not be created: its nearest existing ancestor is
    not a folder (a symlink to one will do) or not one this user may create entries in; None when
    it could. An ancestor that cannot be looked at is a PathAccessError."""
    ancestor = path.parent
    while (info := lstat_or_none(ancestor)) is None and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if info is not None and stat.S_ISLNK(info.st_mode):
        with contextlib.suppress(OSError):  # dangling or unreachable: not a folder
            info = ancestor.stat()
    if info is None or not stat.S_ISDIR(info.st_mode):
        return f"{ancestor} is not a folder"
    if not os.access(ancestor, os.W_OK | os.X_OK):
        return f"cannot create it in {ancestor} (not writable)"
    return None
