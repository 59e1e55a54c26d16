"""Unit tests of launch records: reading, the prefix-caching verdict, and the copies a run keeps."""

from __future__ import annotations

import hashlib
import stat
from pathlib import Path

import pytest

from narwhal_trial import ReadError, TrialUsageError
from narwhal_trial.checks._check import launch_record_item, launch_record_items
from narwhal_trial.server._launch import (
    LaunchRecord,
    keep,
    read_launch_record,
    read_launch_records,
    refuse_caching_on,
    stored_names,
)


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        ("vllm serve meta-llama/Llama-3.1-8B --no-enable-prefix-caching --port 8000\n", True),
        ("vllm serve m \\\n  --max-model-len 16384 \\\n  --no-enable-prefix-caching\n", True),
        ("vllm serve m --port 8000\n", False),
        ("vllm serve m --no-enable-prefix-caching --enable-prefix-caching\n", False),
        ("# --no-enable-prefix-caching\nvllm serve m\n", False),
        ("vllm serve m --no-enable-prefix-caching 'unclosed\n", False),
    ],
)
def test_launch_record(tmp_path: Path, text: str, ok: bool) -> None:
    """A record passes only when the command line's last prefix-caching flag turns it off; the
    same verdict makes run refuse it."""
    path = tmp_path / "launch.txt"
    path.write_text(text)
    record = read_launch_record(path)
    assert launch_record_item(record).ok is ok
    assert record.sha256 == hashlib.sha256(text.encode()).hexdigest()
    if ok:
        refuse_caching_on([record])
    else:
        with pytest.raises(TrialUsageError, match=rf"--launch-record {path}: "):
            refuse_caching_on([record])


def test_unreadable_launch_records_are_read_errors(tmp_path: Path) -> None:
    """Missing, a folder, or a symlink (never followed): a ReadError naming the path, as for an
    unreadable fleet; check and run stop before contacting anything."""
    target = tmp_path / "real.txt"
    target.write_text("vllm serve m --no-enable-prefix-caching\n")
    (tmp_path / "link.txt").symlink_to(target)
    (tmp_path / "folder").mkdir()
    for name in ("missing.txt", "link.txt", "folder"):
        with pytest.raises(ReadError, match=rf"cannot read launch record {tmp_path / name}: "):
            read_launch_records([target, tmp_path / name])


def test_no_launch_record_is_a_failing_item(tmp_path: Path) -> None:
    """The runbook retains launch records: check without any fails instead of skipping them."""
    (missing,) = launch_record_items([])
    assert not missing.ok and "--launch-record" in missing.detail
    path = tmp_path / "launch.txt"
    path.write_text("vllm serve m --no-enable-prefix-caching\n")
    records = read_launch_records([path, path])
    assert [item.ok for item in launch_record_items(records)] == [True, True]


def test_stored_names_are_distinct() -> None:
    """Equal names from different folders (or a record given twice) get -2, -3 before the
    suffix, never a name an earlier record took."""
    paths = ["a/launch.txt", "b/launch.txt", "c/launch-2.txt", "d/launch.txt", "e/serve", "f/serve"]
    records = [LaunchRecord(Path(p), b"", "") for p in paths]  # stored_names reads the path only
    assert stored_names(records) == [
        "launch.txt",
        "launch-2.txt",
        "launch-2-2.txt",
        "launch-3.txt",
        "serve",
        "serve-2",
    ]


def test_keep_copies_privately(tmp_path: Path) -> None:
    """The copies go to launch-records/ (0700) as 0600 files with the source's exact bytes."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first, second = tmp_path / "a" / "h200-0.txt", tmp_path / "b" / "h200-0.txt"
    first.write_bytes(b"vllm serve m --no-enable-prefix-caching --port 1\n")
    second.write_bytes(b"vllm serve m --no-enable-prefix-caching --port 2\n")
    run = tmp_path / "run"
    run.mkdir()
    kept = keep(read_launch_records([first, second]), run)
    assert [file for file, _ in kept] == [
        "launch-records/h200-0.txt",
        "launch-records/h200-0-2.txt",
    ]
    assert stat.S_IMODE((run / "launch-records").stat().st_mode) == 0o700
    for (file, record), source in zip(kept, (first, second), strict=True):
        copy = run / file
        assert copy.read_bytes() == source.read_bytes() == record.data
        assert stat.S_IMODE(copy.stat().st_mode) == 0o600
    assert keep([], tmp_path / "nothing") == [] and not (tmp_path / "nothing").exists()
