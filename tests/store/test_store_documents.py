"""new_documents: the store + sidecar pair that live, refit and merge modes build."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import ValidationError

from narwhal_store import (
    PENDING_SHA256,
    Generator,
    LoadedFleet,
    ProfileStore,
    SamplesSidecar,
    Source,
    new_documents,
    read_store,
    write_store,
)

PairFactory = Callable[..., Any]
GEN = Generator(name="narwhal-profile", version="0.1.0")


def _documents(
    fleet: LoadedFleet,
    make_pair: PairFactory,
    mode: Literal["live", "refit", "merge"],
    **options: Any,
) -> tuple[ProfileStore, SamplesSidecar]:
    """new_documents around make_pair's profiles and samples."""
    ref, ref_side = make_pair()
    return new_documents(
        mode=mode,
        fleet_sha256=fleet.sha256,
        generator=GEN,
        profiles=ref.profiles,
        samples=ref_side.profiles,
        **options,
    )


def test_new_documents_share_one_header(fleet: LoadedFleet, make_pair: PairFactory) -> None:
    """Store and sidecar get the same mode, fleet, generator and time; digests are placeholders."""
    ref, ref_side = make_pair()
    source = Source(path="/in/profiles.json", sha256="a" * 64, kind="store")
    store, sidecar = _documents(
        fleet, make_pair, "refit", sources=[source], created_at="2026-11-30T06:00:00+00:00"
    )
    for doc in (store, sidecar):
        assert (doc.mode, doc.fleet_sha256, doc.generator) == ("refit", fleet.sha256, GEN)
        assert doc.created_at == "2026-11-30T06:00:00+00:00"
    assert (store.format, sidecar.format) == ("narwhal.profiles", "narwhal.samples")
    assert store.samples.path == "pending.samples.json"
    assert store.samples.sha256 == PENDING_SHA256
    assert store.profiles == ref.profiles and sidecar.profiles == ref_side.profiles
    assert sidecar.sources == [source]


def test_new_documents_default_time_and_write(
    tmp_path: Path, fleet: LoadedFleet, make_pair: PairFactory
) -> None:
    """Without created_at the time is now (UTC, seconds); write_store makes a verified pair."""
    ref, _ = make_pair()
    store, sidecar = _documents(
        fleet, make_pair, "live", samples_name="fleet-profiles.samples.json"
    )
    assert store.samples.path == "fleet-profiles.samples.json"
    assert sidecar.sources == []
    when = datetime.fromisoformat(store.created_at)
    assert when.utcoffset() == timedelta(0)
    assert when.microsecond == 0
    written = write_store(tmp_path / "p.json", store, sidecar, mode="fresh")
    loaded = read_store(written.path)
    assert loaded.store.samples.path == "p.samples.json"
    assert [p.key for p in loaded.store.profiles] == [p.key for p in ref.profiles]


def test_sidecar_refuses_duplicate_keys(make_pair: PairFactory) -> None:
    """A sidecar with one key twice is refused at the second entry's path, like a store."""
    _, sidecar = make_pair()
    doc = sidecar.model_dump(mode="json")
    dup = {**doc, "profiles": [doc["profiles"][0], doc["profiles"][0]]}
    with pytest.raises(ValidationError, match=r"profiles\[1\]\.key: duplicate profile key"):
        SamplesSidecar.model_validate(dup)
