"""Mixing points and the mixing fit in the store and sidecar: format_version 2 only when a
profile holds them, a written pair reads back, and a merge keeps them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from narwhal_fit import MixingPoint, fit_mixing
from narwhal_store import (
    Generator,
    InjectedPrefill,
    LoadedFleet,
    MixingFitDoc,
    MixingSample,
    ProfileKey,
    ProfileStore,
    SamplesSidecar,
    merge_stores,
    new_documents,
    read_store,
    write_store,
)

PairFactory = Callable[..., tuple[ProfileStore, SamplesSidecar]]


def _sample(prefill_len: int, loss: float, work: float, chunks: int) -> MixingSample:
    return MixingSample(
        input_len=512,
        concurrency=4,
        prefill_len=prefill_len,
        interval_s=0.1,
        repeat=0,
        valid=True,
        streams=[],
        prefills=[InjectedPrefill(request_id="mp-0", send_ns=10, first_ns=30)],
        loss_s=loss,
        work_s=work,
        chunks=chunks,
    )


def _with_mixing(pair: tuple[ProfileStore, SamplesSidecar]) -> tuple[ProfileStore, SamplesSidecar]:
    """The pair rebuilt with mixing points and a mixing fit on its first profile."""
    store, sidecar = pair
    samples = [_sample(256, 0.004, 0.003, 1), _sample(16384, 0.21, 0.2, 2)]
    fit = fit_mixing([MixingPoint(0.003, 1, 0.004), MixingPoint(0.2, 2, 0.21)])
    profiles = list(store.profiles)
    entries = list(sidecar.profiles)
    profiles[0] = profiles[0].model_copy(
        update={"mixing_fit": MixingFitDoc.model_validate(fit.to_dict())}
    )
    entries[0] = entries[0].model_copy(update={"mixing_samples": samples})
    return new_documents(
        mode="live",
        fleet_sha256=store.fleet_sha256,
        generator=store.generator,
        profiles=profiles,
        samples=entries,
        created_at=store.created_at,
    )


def test_version_2_only_with_mixing(make_pair: PairFactory, tmp_path: Path) -> None:
    """Without mixing both documents are format_version 1; with it 2, and the pair reads back."""
    plain = make_pair(["solo"])
    assert (plain[0].format_version, plain[1].format_version) == (1, 1)
    mixed = _with_mixing(plain)
    assert (mixed[0].format_version, mixed[1].format_version) == (2, 2)
    path = tmp_path / "mixed.json"
    write_store(path, *mixed, mode="fresh")
    loaded = read_store(path)
    assert loaded.store.format_version == 2
    fit = loaded.store.profiles[0].mixing_fit
    assert fit is not None and fit.form == "mixing-share-step-v1"
    assert len(loaded.sidecar.profiles[0].mixing_samples) == 2


def test_version_1_refuses_mixing(make_pair: PairFactory) -> None:
    """A version-1 document holding mixing is refused, naming where."""
    store, sidecar = _with_mixing(make_pair(["solo"]))
    doc: dict[str, Any] = store.model_dump(mode="json")
    doc["format_version"] = 1
    with pytest.raises(ValueError, match="needs format_version 2"):
        ProfileStore.model_validate(doc)
    side: dict[str, Any] = sidecar.model_dump(mode="json")
    side["format_version"] = 1
    with pytest.raises(ValueError, match="need format_version 2"):
        SamplesSidecar.model_validate(side)


def test_merge_keeps_mixing(tmp_path: Path, fleet: LoadedFleet, make_pair: PairFactory) -> None:
    """A merge of a store with mixing and one without keeps the points and the fit (version 2)."""
    one = tmp_path / "one.json"
    write_store(one, *_with_mixing(make_pair(["h200-0.prefill", "h200-0.decode"])), mode="fresh")
    two = tmp_path / "two.json"
    write_store(two, *make_pair(keys=[_solo()]), mode="fresh")
    store, sidecar = merge_stores([one, two], fleet, generator=Generator(name="t", version="1"))
    assert store.format_version == sidecar.format_version == 2
    assert store.profiles[0].mixing_fit == read_store(one).store.profiles[0].mixing_fit
    assert [len(e.mixing_samples) for e in sidecar.profiles] == [2, 0, 0]
    out = tmp_path / "merged.json"
    write_store(out, store, sidecar, mode="fresh")
    assert read_store(out).store.format_version == 2


def _solo() -> ProfileKey:
    return ProfileKey(engine="solo", gpu_group=None, role_split={"mixed": 1}, target_role="mixed")
