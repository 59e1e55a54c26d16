"""Writing stores: atomic pairs, fresh/replace modes, symlink refusals and crash safety."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from narwhal_store import (
    DestinationError,
    FormatError,
    IntegrityError,
    StoreError,
    check_destination,
    finish_pending,
    read_store,
    samples_digest,
    sha256_file,
    sidecar_path,
    write_store,
)

PairFactory = Callable[..., Any]


def _hidden(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def test_sidecar_path_rule() -> None:
    """The sidecar is the store path with its suffix replaced by .samples.json."""
    assert sidecar_path(Path("p/fleet-profiles.json")) == Path("p/fleet-profiles.samples.json")
    assert sidecar_path("a.b.json") == Path("a.b.samples.json")
    assert sidecar_path("profiles") == Path("profiles.samples.json")


def test_fresh_write_produces_a_verified_pair(tmp_path: Path, make_pair: PairFactory) -> None:
    """A fresh write creates folders, fills in every digest, and reads back verified."""
    store, sidecar = make_pair()
    path = tmp_path / "new" / "deeper" / "fleet-profiles.json"
    written = write_store(path, store, sidecar, mode="fresh")
    side = tmp_path / "new" / "deeper" / "fleet-profiles.samples.json"
    assert written.sidecar_path == side
    assert written.sha256 == sha256_file(path)
    assert written.sidecar_sha256 == sha256_file(side)
    doc = orjson.loads(path.read_bytes())
    assert doc["samples"] == {"path": side.name, "sha256": sha256_file(side)}
    text = path.read_text()
    assert text.startswith('{\n  "created_at"') and text.endswith("}\n")
    loaded = read_store(path)
    assert not loaded.recovered
    assert loaded.store == written.store
    for profile in loaded.store.profiles:
        assert profile.samples_sha256 == samples_digest(loaded.samples(profile.key))
    assert _hidden(path.parent) == []


def test_fresh_mode_refuses_existing_store_or_sidecar(
    tmp_path: Path, make_pair: PairFactory
) -> None:
    """Fresh mode fails when either the store or its sidecar exists, and changes nothing."""
    store, sidecar = make_pair()
    for existing in ("out.json", "out.samples.json"):
        folder = tmp_path / existing.replace(".", "-")
        folder.mkdir()
        (folder / existing).write_text("keep me")
        with pytest.raises(DestinationError, match="already exists"):
            check_destination(folder / "out.json", mode="fresh")
        with pytest.raises(DestinationError, match="already exists"):
            write_store(folder / "out.json", store, sidecar, mode="fresh")
        assert (folder / existing).read_text() == "keep me"
        assert sorted(p.name for p in folder.iterdir()) == [existing]
        check_destination(folder / "out.json", mode="replace")


def test_replace_mode_overwrites_the_pair(tmp_path: Path, make_pair: PairFactory) -> None:
    """Replace mode swaps in a new store and sidecar; stale files are not left behind."""
    path = tmp_path / "p.json"
    write_store(path, *make_pair(start=1.0), mode="fresh")
    new = write_store(path, *make_pair(["solo"], start=2.0), mode="replace")
    loaded = read_store(path)
    assert [p.key.engine for p in loaded.store.profiles] == ["solo"]
    assert loaded.sidecar_sha256 == new.sidecar_sha256
    assert _hidden(tmp_path) == []


def test_mismatched_pair_is_refused_before_writing(tmp_path: Path, make_pair: PairFactory) -> None:
    """A store profile without a sidecar entry (or vice versa) is refused; nothing is written."""
    out = tmp_path / "out" / "p.json"
    store, _ = make_pair()
    _, partial = make_pair(["solo"])
    with pytest.raises(IntegrityError, match="has no entry in the sidecar"):
        write_store(out, store, partial, mode="fresh")
    small, _ = make_pair(["solo"])
    _, full = make_pair()
    with pytest.raises(IntegrityError, match="has no profile in the store"):
        write_store(out, small, full, mode="fresh")
    with pytest.raises(StoreError, match="write mode"):
        write_store(out, small, full, mode="append")  # type: ignore[arg-type]
    assert not out.parent.exists()


def test_non_finite_numbers_are_never_written(tmp_path: Path, make_pair: PairFactory) -> None:
    """NaN in free-form parts (evidence, fit extras) is refused instead of written as null."""
    out = tmp_path / "out" / "p.json"
    store, sidecar = make_pair()
    sidecar.profiles[0].evidence.before = {"x": float("nan")}
    with pytest.raises(FormatError, match="cannot write the sidecar"):
        write_store(out, store, sidecar, mode="fresh")
    store, sidecar = make_pair()
    extras = store.profiles[0].prefill_fit.model_extra
    assert extras is not None
    extras["mean_rel_error"] = float("inf")
    with pytest.raises(FormatError, match="cannot write the store"):
        write_store(out, store, sidecar, mode="fresh")
    assert not out.parent.exists()


@pytest.mark.parametrize("mode", ["fresh", "replace"])
@pytest.mark.parametrize("which", ["store", "sidecar"])
def test_symlinked_store_or_sidecar_is_refused(
    tmp_path: Path, make_pair: PairFactory, mode: str, which: str
) -> None:
    """A symlink at the store or sidecar path is refused in every mode; its target is untouched."""
    victim = tmp_path / "victim.json"
    victim.write_text("precious")
    out = tmp_path / "out"
    out.mkdir()
    link = out / ("p.json" if which == "store" else "p.samples.json")
    link.symlink_to(victim)
    with pytest.raises(DestinationError, match="symlink"):
        check_destination(out / "p.json", mode=mode)  # type: ignore[arg-type]
    with pytest.raises(DestinationError, match="symlink"):
        write_store(out / "p.json", *make_pair(), mode=mode)  # type: ignore[arg-type]
    assert victim.read_text() == "precious"
    assert link.is_symlink()
    assert sorted(p.name for p in out.iterdir()) == [link.name]


def test_dangling_symlink_is_refused(tmp_path: Path, make_pair: PairFactory) -> None:
    """A dangling symlink at the store path is refused, and nothing is created at its target."""
    (tmp_path / "p.json").symlink_to(tmp_path / "nowhere.json")
    with pytest.raises(DestinationError, match="symlink"):
        write_store(tmp_path / "p.json", *make_pair(), mode="replace")
    assert not (tmp_path / "nowhere.json").exists()


@pytest.mark.parametrize("mode", ["fresh", "replace"])
def test_symlinked_folder_is_refused(tmp_path: Path, make_pair: PairFactory, mode: str) -> None:
    """A store whose folder is a symlink is refused; nothing appears in the real folder."""
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real, target_is_directory=True)
    with pytest.raises(DestinationError, match="symlink"):
        check_destination(tmp_path / "link" / "p.json", mode=mode)  # type: ignore[arg-type]
    with pytest.raises(DestinationError, match="symlink"):
        write_store(tmp_path / "link" / "p.json", *make_pair(), mode=mode)  # type: ignore[arg-type]
    assert list(real.iterdir()) == []


def test_non_file_destinations_are_refused(tmp_path: Path, make_pair: PairFactory) -> None:
    """A directory at the store path, or a file where the folder should be, is refused."""
    (tmp_path / "p.json").mkdir()
    with pytest.raises(DestinationError, match="not a regular file"):
        write_store(tmp_path / "p.json", *make_pair(), mode="replace")
    (tmp_path / "plain").write_text("x")
    with pytest.raises(DestinationError, match="not a directory"):
        check_destination(tmp_path / "plain" / "sub" / "p.json", mode="fresh")
    with pytest.raises(DestinationError, match="not a directory"):
        check_destination(tmp_path / "plain" / "p.json", mode="fresh")


class _Crash(OSError):
    """The simulated crash."""


@contextlib.contextmanager
def _raises_crash() -> Iterator[None]:
    """Expect write_store to report the simulated crash as a StoreError caused by it."""
    with pytest.raises(StoreError, match="simulated crash") as caught:
        yield
    assert isinstance(caught.value.__cause__, _Crash)


def _crash_on(
    monkeypatch: pytest.MonkeyPatch,
    calls: int,
    names: tuple[str, ...] = ("replace", "link", "fsync", "write"),
) -> list[tuple[str, tuple[Any, ...]]]:
    """Make the ``calls``-th call among the os functions ``names`` raise; returns every call seen
    (function name, positional arguments)."""
    seen: list[tuple[str, tuple[Any, ...]]] = []
    for name in names:
        original = getattr(os, name)

        def wrapper(*args: Any, _name: str = name, _orig: Any = original, **kw: Any) -> Any:
            seen.append((_name, args))
            if len(seen) == calls:
                raise _Crash(f"simulated crash in os.{_name}")
            return _orig(*args, **kw)

        monkeypatch.setattr(os, name, wrapper)
    return seen


def test_crash_on_store_rename_keeps_old_pair(
    tmp_path: Path, make_pair: PairFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """os.replace failing on its second call (the store commit) leaves the old store and sidecar
    byte-identical and verified."""
    path = tmp_path / "p.json"
    write_store(path, *make_pair(start=1.0), mode="fresh")
    old_store, old_side = path.read_bytes(), sidecar_path(path).read_bytes()
    calls = _crash_on(monkeypatch, 2, names=("replace",))
    with _raises_crash():
        write_store(path, *make_pair(start=2.0), mode="replace")
    monkeypatch.undo()
    assert [args[1] for _, args in calls][1] == "p.json"
    assert path.read_bytes() == old_store
    assert sidecar_path(path).read_bytes() == old_side
    loaded = read_store(path)
    assert not loaded.recovered
    assert loaded.sidecar.profiles[0].evidence.before["process_start_time_seconds"] == 1.0


def test_crash_after_commit_reads_new_pair_then_heals(
    tmp_path: Path, make_pair: PairFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crash after the store commit (sidecar not yet renamed) reads as the new, matching pair via
    the pending sidecar, with or without verification; the next write removes the leftover."""
    path = tmp_path / "p.json"
    write_store(path, *make_pair(start=1.0), mode="fresh")
    calls = _crash_on(monkeypatch, 3, names=("replace",))
    with _raises_crash():
        write_store(path, *make_pair(start=2.0), mode="replace")
    monkeypatch.undo()
    assert [args[1] for _, args in calls][2] == "p.samples.json"
    for verify in (True, False):
        loaded = read_store(path, verify=verify)
        assert loaded.recovered
        assert loaded.sidecar_path.name.endswith(".pending")
        assert loaded.sidecar.profiles[0].evidence.before["process_start_time_seconds"] == 2.0
    assert len(_hidden(tmp_path)) == 1
    write_store(path, *make_pair(start=3.0), mode="replace")
    assert _hidden(tmp_path) == []
    assert not read_store(path).recovered


def test_crash_at_every_step_never_leaves_a_mismatched_pair(
    tmp_path: Path, make_pair: PairFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Failing each write/fsync/rename in turn: before the commit the old pair is intact, after it
    the new pair reads verified; no step yields a store whose sidecar does not match."""
    old, new = make_pair(start=1.0), make_pair(start=2.0)
    probe = tmp_path / "probe" / "p.json"
    write_store(probe, *old, mode="fresh")
    steps = _crash_on(monkeypatch, 0)
    write_store(probe, *new, mode="replace")
    monkeypatch.undo()
    assert len(steps) >= 6
    outcomes = set()
    for step in range(1, len(steps) + 1):
        path = tmp_path / f"step{step}" / "p.json"
        write_store(path, *old, mode="fresh")
        old_bytes = path.read_bytes(), sidecar_path(path).read_bytes()
        _crash_on(monkeypatch, step)
        with _raises_crash():
            write_store(path, *new, mode="replace")
        monkeypatch.undo()
        loaded = read_store(path)
        start = loaded.sidecar.profiles[0].evidence.before["process_start_time_seconds"]
        if start == 1.0:
            assert (path.read_bytes(), sidecar_path(path).read_bytes()) == old_bytes
        outcomes.add(start)
    assert outcomes == {1.0, 2.0}


def test_fresh_write_crash_before_commit_allows_a_retry(
    tmp_path: Path, make_pair: PairFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fresh write that dies before the commit leaves no store, and a retry succeeds."""
    path = tmp_path / "p.json"
    _crash_on(monkeypatch, 3)
    with _raises_crash():
        write_store(path, *make_pair(), mode="fresh")
    monkeypatch.undo()
    assert not path.exists() and not sidecar_path(path).exists()
    check_destination(path, mode="fresh")
    write_store(path, *make_pair(), mode="fresh")
    assert read_store(path).store.mode == "live"


def test_a_write_removes_stale_temporary_files_of_its_own_store(
    tmp_path: Path, make_pair: PairFactory
) -> None:
    """Temporary files and pending sidecars that killed writes of this store left behind are
    removed by its next write; files of other stores and other hidden files are not touched."""
    folder = tmp_path / "out"
    folder.mkdir()
    path = folder / "p.json"
    ours = [
        ".p.json.0123456789ab.tmp",
        ".p.samples.json.ba9876543210.tmp",
        ".p.samples.json.0123456789abcdef.pending",
    ]
    theirs = [".q.json.0123456789ab.tmp", ".p.json.notes", ".p.json.0123.tmp", "p.json.tmp"]
    for name in ours + theirs:
        (folder / name).write_bytes(b"partial")
    write_store(path, *make_pair(), mode="fresh")
    assert sorted(p.name for p in folder.iterdir()) == sorted(["p.json", "p.samples.json", *theirs])
    for name in ours:
        (folder / name).write_bytes(b"partial")
    write_store(path, *make_pair(start=2.0), mode="replace")
    assert sorted(p.name for p in folder.iterdir()) == sorted(["p.json", "p.samples.json", *theirs])


def test_finish_pending_completes_an_interrupted_write(
    tmp_path: Path, make_pair: PairFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write killed between its two renames is finished by finish_pending: the pending sidecar
    becomes X.samples.json, nothing hidden is left, and a second call has nothing to do."""
    folder = tmp_path / "out"
    path = folder / "p.json"
    calls = _crash_on(monkeypatch, 3, names=("link", "replace"))  # pending, store, then sidecar
    with _raises_crash():
        write_store(path, *make_pair(start=2.0), mode="fresh")
    monkeypatch.undo()
    assert [name for name, _ in calls] == ["replace", "link", "link"]
    assert not sidecar_path(path).exists() and read_store(path).recovered
    assert finish_pending(path) is True
    assert _hidden(folder) == []
    loaded = read_store(path)
    assert not loaded.recovered and loaded.sidecar_path == sidecar_path(path)
    assert finish_pending(path) is False
