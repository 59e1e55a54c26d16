"""Launch records: the engines' ``vllm serve`` command lines the runbook has the operator retain.

Each is read once (a regular file, never through a symlink; ReadError naming the path otherwise),
judged for prefix caching (the command line must hold ``--no-enable-prefix-caching`` and no later
``--enable-prefix-caching``), and, for ``run``, copied into the run folder under a name of its own.
``check`` lists the verdict as one of its items; ``run`` refuses a record that fails it.
"""

from __future__ import annotations

import hashlib
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from narwhal_trial._errors import ReadError, TrialUsageError
from narwhal_trial._files import DIR_MODE, atomic_write, read_regular

OFF_FLAG = "--no-enable-prefix-caching"
ON_FLAG = "--enable-prefix-caching"
FOLDER = "launch-records"
"""The run folder's subfolder holding the copies."""


@dataclass(frozen=True, slots=True)
class LaunchRecord:
    """One launch record as read: the path given, its bytes and their SHA-256."""

    path: Path
    data: bytes
    sha256: str


def read_launch_record(path: Path) -> LaunchRecord:
    """Read one launch record; ReadError naming the path when it cannot be read (missing, a
    symlink, not a regular file, a folder on its way that cannot be entered)."""
    try:
        data = read_regular(path)
    except OSError as exc:
        raise ReadError(f"cannot read launch record {path}: {exc.strerror or exc}") from exc
    return LaunchRecord(path, data, hashlib.sha256(data).hexdigest())


def read_launch_records(paths: Sequence[Path]) -> list[LaunchRecord]:
    """Every launch record, in the order given; the first that cannot be read raises ReadError."""
    return [read_launch_record(path) for path in paths]


def prefix_caching_off(record: LaunchRecord) -> tuple[bool, str]:
    """Whether the record's command line turns prefix caching off (the last flag wins), and the
    detail: the flag, or why not."""
    text = record.data.decode("utf-8", "replace")
    try:
        words = shlex.split(text, comments=True)
    except ValueError as exc:
        return False, f"not a command line: {exc}"
    flags = [w.split("=", 1)[0] for w in words if w.split("=", 1)[0] in (OFF_FLAG, ON_FLAG)]
    if not flags:
        return False, f"no {OFF_FLAG} in the command line"
    if flags[-1] != OFF_FLAG:
        return False, f"{ON_FLAG} comes after {OFF_FLAG}"
    return True, OFF_FLAG


def stored_names(records: Sequence[LaunchRecord]) -> list[str]:
    """The file name of each record's copy: its own name, with ``-2``, ``-3``... before the suffix
    when an earlier record took it (equal names from different folders, or one given twice)."""
    taken: set[str] = set()
    names: list[str] = []
    for record in records:
        own = PurePosixPath(record.path.name)
        name, n = own.name, 1
        while name in taken:
            n += 1
            name = f"{own.stem}-{n}{own.suffix}"
        taken.add(name)
        names.append(name)
    return names


def refuse_caching_on(records: Sequence[LaunchRecord]) -> None:
    """TrialUsageError naming the first record that does not show prefix caching off: ``run``
    keeps only launch records ``check`` passes."""
    for record in records:
        ok, detail = prefix_caching_off(record)
        if not ok:
            raise TrialUsageError(
                f"--launch-record {record.path}: {detail}; the trial runs with prefix caching "
                f"off ({OFF_FLAG}), as check verifies"
            )


def keep(records: Sequence[LaunchRecord], run_dir: Path) -> list[tuple[str, LaunchRecord]]:
    """Copy every record into ``run_dir/launch-records/`` (folder 0700, files 0600, each written
    atomically, a symlink never followed); returns each copy's path relative to ``run_dir``.
    Raises OSError when a copy cannot be written."""
    if not records:
        return []
    folder = run_dir / FOLDER
    folder.mkdir(mode=DIR_MODE)
    folder.chmod(DIR_MODE, follow_symlinks=False)
    kept = []
    for name, record in zip(stored_names(records), records, strict=True):
        atomic_write(folder / name, record.data)
        kept.append((f"{FOLDER}/{name}", record))
    return kept
