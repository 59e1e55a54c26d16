"""Symlink-refusing, crash-safe file operations relative to one open directory.

Every operation goes through a directory file descriptor opened with ``O_NOFOLLOW``, so the folder
cannot be swapped for a symlink between the checks and the writes; files are created with
``O_EXCL | O_NOFOLLOW`` and renamed with ``os.replace`` (which never follows the destination).
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from pathlib import Path
from types import TracebackType
from typing import Self

from narwhal_store._errors import DestinationError, StoreError

__all__ = ["Folder", "check_folder", "check_target", "write_file_atomic"]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_NO_HARDLINKS = frozenset({errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EMLINK})


def check_folder(folder: Path) -> None:
    """Refuse a folder that is a symlink, not a directory or not writable; a missing folder needs a
    writable directory as its nearest existing ancestor. Nothing is created."""
    try:
        info = folder.lstat()
    except (FileNotFoundError, NotADirectoryError):
        ancestor = folder.parent
        while not ancestor.exists() and ancestor != ancestor.parent:
            ancestor = ancestor.parent
        if not ancestor.is_dir():
            raise DestinationError(
                f"cannot create folder {folder}: {ancestor} is not a directory"
            ) from None
        if not os.access(ancestor, os.W_OK | os.X_OK):
            raise DestinationError(
                f"cannot create folder {folder}: {ancestor} is not writable"
            ) from None
        return
    except OSError as exc:
        raise DestinationError(f"cannot use folder {folder}: {exc.strerror or exc}") from exc
    if stat.S_ISLNK(info.st_mode):
        raise DestinationError(f"folder {folder} is a symlink; refusing to write through it")
    if not stat.S_ISDIR(info.st_mode):
        raise DestinationError(f"{folder} is not a directory")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise DestinationError(f"folder {folder} is not writable")


def check_target(info: os.stat_result | None, path: Path, *, fresh: bool) -> None:
    """Refuse a destination that is a symlink, not a regular file, or exists when ``fresh``."""
    if info is None:
        return
    if stat.S_ISLNK(info.st_mode):
        raise DestinationError(f"{path} is a symlink; refusing to write through it")
    if fresh:
        raise DestinationError(f"{path} already exists; a fresh output path is required")
    if not stat.S_ISREG(info.st_mode):
        raise DestinationError(f"{path} exists and is not a regular file")


class Folder:
    """An open directory (never a symlink) in which files are created, renamed and removed."""

    def __init__(self, path: Path, *, create: bool) -> None:
        self.path = path
        check_folder(path)
        if create:
            try:
                path.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise DestinationError(f"cannot create folder {path}: {exc.strerror}") from exc
        try:
            self.fd = os.open(path, _DIR_FLAGS)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise DestinationError(f"folder {path} is a symlink or not a directory") from exc
            raise DestinationError(f"cannot open folder {path}: {exc.strerror}") from exc

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        os.close(self.fd)

    def lstat(self, name: str) -> os.stat_result | None:
        """``lstat`` of ``name`` in this folder, None when absent."""
        try:
            return os.lstat(name, dir_fd=self.fd)
        except FileNotFoundError:
            return None

    def names(self) -> list[str]:
        """The folder's entries."""
        return os.listdir(self.fd)  # noqa: PTH208 - listing by descriptor, not by path

    def sync(self) -> None:
        """fsync the folder, making renames and unlinks durable."""
        os.fsync(self.fd)

    def write_temp(self, hint: str, data: bytes, *, mode: int | None = None) -> str:
        """Write ``data`` to a new hidden temporary file (``mode``, default 0666 minus umask),
        fsync it, and return its name."""
        name = f".{hint}.{secrets.token_hex(6)}.tmp"
        fd = os.open(name, _NEW_FILE_FLAGS, 0o666 if mode is None else mode, dir_fd=self.fd)
        try:
            if mode is not None:
                os.fchmod(fd, mode)
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            self.remove(name)
            raise
        os.close(fd)
        return name

    def replace(self, src: str, dst: str) -> None:
        """Atomically rename ``src`` over ``dst`` (a symlink at ``dst`` is replaced, never
        followed), then fsync the folder."""
        os.replace(src, dst, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        self.sync()

    def publish_new(self, src: str, dst: str) -> None:
        """Give ``src`` the name ``dst`` only if ``dst`` does not exist (hard link, then unlink);
        ``DestinationError`` when it does. Filesystems without hard links fall back to a checked
        rename."""
        try:
            os.link(src, dst, src_dir_fd=self.fd, dst_dir_fd=self.fd, follow_symlinks=False)
        except FileExistsError as exc:
            raise DestinationError(
                f"{self.path / dst} already exists; a fresh output path is required"
            ) from exc
        except OSError as exc:
            if exc.errno not in _NO_HARDLINKS:
                raise
            check_target(self.lstat(dst), self.path / dst, fresh=True)
            self.replace(src, dst)
            return
        self.remove(src)
        self.sync()

    def remove(self, name: str) -> None:
        """Remove ``name`` if present (never follows a symlink)."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=self.fd)


def write_file_atomic(path: str | Path, data: bytes, *, mode: int = 0o600) -> None:
    """Write one file atomically: a temporary file in the same (existing) folder, fsync, rename
    over ``path``, fsync the folder; the file gets ``mode`` (default private, 0600).

    A destination or folder that is a symlink, a destination that is not a regular file, and a
    missing or unwritable folder are refused (``DestinationError``) before anything is written; a
    failed write leaves nothing behind (``StoreError`` names the file and the reason).
    """
    target = Path(path)
    with Folder(target.parent, create=False) as folder:
        check_target(folder.lstat(target.name), target, fresh=False)
        try:
            temp = folder.write_temp(target.name, data, mode=mode)
        except OSError as exc:
            raise StoreError(f"cannot write {target}: {exc.strerror or exc}") from exc
        try:
            folder.replace(temp, target.name)
        except OSError as exc:
            folder.remove(temp)
            raise StoreError(f"cannot write {target}: {exc.strerror or exc}") from exc
