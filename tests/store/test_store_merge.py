"""Merging stores: success with recorded sources, and each refusal."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from narwhal_store import (
    BoolSetting,
    Generator,
    IntSetting,
    LoadedFleet,
    MergeError,
    ProfileKey,
    SchedulerSettings,
    merge_stores,
    read_store,
    sha256_file,
    sidecar_path,
    write_store,
)

PairFactory = Callable[..., Any]


def _store(tmp_path: Path, name: str, pair: Any) -> Path:
    path = tmp_path / "inputs" / f"{name}.json"
    write_store(path, *pair, mode="fresh")
    return path


def test_merge_combines_inputs_and_records_sources(
    tmp_path: Path, fleet: LoadedFleet, make_pair: PairFactory
) -> None:
    """Two stores covering the fleet merge into one verified store; sources carry every SHA-256."""
    one = _store(tmp_path, "split-1", make_pair(["h200-0.prefill", "h200-0.decode"]))
    variant = ProfileKey(
        engine="solo", gpu_group=None, role_split={"mixed": 1}, target_role="mixed"
    )
    shared = ProfileKey(
        engine="solo", gpu_group="x", role_split={"mixed": 1, "decode": 1}, target_role="mixed"
    )
    two = _store(tmp_path, "split-2", make_pair(keys=[variant, shared]))
    store, sidecar = merge_stores(
        [one, two], fleet, generator=Generator(name="narwhal-profile", version="9.9")
    )
    assert store.mode == sidecar.mode == "merge"
    assert store.fleet_sha256 == fleet.sha256
    assert [p.key.engine for p in store.profiles] == [
        "h200-0.prefill",
        "h200-0.decode",
        "solo",
        "solo",
    ]
    expected = []
    for path in (one, two):
        expected.append((str(path.absolute()), sha256_file(path), "store"))
        side = sidecar_path(path)
        expected.append((str(side.absolute()), sha256_file(side), "samples"))
    assert [(s.path, s.sha256, s.kind) for s in sidecar.sources] == expected
    out = tmp_path / "combined.json"
    write_store(out, store, sidecar, mode="fresh")
    loaded = read_store(out)
    assert len(loaded.store.profiles) == 4
    assert loaded.store.generator.version == "9.9"
    assert len(loaded.sidecar.sources) == 4


def test_merge_keeps_each_profiles_scheduler_settings(
    tmp_path: Path, fleet: LoadedFleet, make_pair: PairFactory
) -> None:
    """Each profile's scheduler settings (and their sources) go into the merged store unchanged;
    a profile written before they were kept stays without them."""
    shown = SchedulerSettings(
        max_num_batched_tokens=IntSetting(value=2048, source="engine"),
        max_num_seqs=IntSetting(value=8, source="limits"),
        chunked_prefill=BoolSetting(value=None, source="unknown"),
    )
    store, sidecar = make_pair(["h200-0.prefill", "h200-0.decode"])
    store.profiles[0] = store.profiles[0].model_copy(update={"scheduler": shown})
    one = _store(tmp_path, "a", (store, sidecar))
    two = _store(tmp_path, "b", make_pair(["solo"]))
    merged, merged_sidecar = merge_stores([one, two], fleet)
    assert [p.scheduler for p in merged.profiles] == [shown, None, None]
    out = tmp_path / "merged.json"
    write_store(out, merged, merged_sidecar, mode="fresh")
    assert read_store(out).store.profiles[0].scheduler == shown


def test_merge_needs_two_inputs(tmp_path: Path, fleet: LoadedFleet, make_pair: PairFactory) -> None:
    """One input is refused."""
    one = _store(tmp_path, "all", make_pair())
    with pytest.raises(MergeError, match="at least two"):
        merge_stores([one], fleet)


def test_merge_refuses_duplicate_keys(
    tmp_path: Path, fleet: LoadedFleet, make_pair: PairFactory
) -> None:
    """The same key in two inputs is refused, naming both inputs and the key."""
    one = _store(tmp_path, "a", make_pair(["h200-0.prefill", "solo"]))
    two = _store(tmp_path, "b", make_pair(["h200-0.decode", "solo"]))
    with pytest.raises(MergeError) as caught:
        merge_stores([one, two], fleet)
    message = str(caught.value)
    assert "profile solo (no group, mixed=1, target mixed)" in message
    assert str(one) in message and str(two) in message


def test_merge_refuses_uncovered_engine(
    tmp_path: Path, fleet: LoadedFleet, make_pair: PairFactory
) -> None:
    """A fleet engine that no input covers is refused by name."""
    one = _store(tmp_path, "a", make_pair(["h200-0.prefill"]))
    two = _store(tmp_path, "b", make_pair(["solo"]))
    with pytest.raises(MergeError, match=r"engine 'h200-0\.decode' of fleet .* not covered"):
        merge_stores([one, two], fleet)


def test_merge_refuses_engine_outside_fleet(
    tmp_path: Path, fleet: LoadedFleet, make_pair: PairFactory
) -> None:
    """A profile for an engine the fleet does not have is refused."""
    ghost = ProfileKey(
        engine="ghost", gpu_group=None, role_split={"decode": 1}, target_role="decode"
    )
    one = _store(tmp_path, "a", make_pair())
    two = _store(tmp_path, "b", make_pair(keys=[ghost]))
    with pytest.raises(MergeError, match=r"b\.json: profile ghost .* not in the fleet"):
        merge_stores([one, two], fleet)


def test_merge_refuses_unverifiable_input(
    tmp_path: Path, fleet: LoadedFleet, make_pair: PairFactory
) -> None:
    """An input whose sidecar fails verification is refused, naming the input."""
    one = _store(tmp_path, "a", make_pair(["h200-0.prefill", "h200-0.decode"]))
    two = _store(tmp_path, "b", make_pair(["solo"]))
    side = sidecar_path(two)
    side.write_bytes(side.read_bytes() + b" ")
    with pytest.raises(MergeError, match=r"input .*b\.json: sidecar .* has SHA-256"):
        merge_stores([one, two], fleet)
    side.unlink()
    with pytest.raises(MergeError, match=r"input .*b\.json: sidecar .* missing"):
        merge_stores([one, two], fleet)


def test_merge_refuses_evidence_that_does_not_match(
    tmp_path: Path, fleet: LoadedFleet, make_pair: PairFactory
) -> None:
    """A binding whose SHA-256 is not its evidence's, or evidence that changed, is refused."""
    one = _store(tmp_path, "a", make_pair(["h200-0.prefill", "h200-0.decode"]))
    store, sidecar = make_pair(["solo"])
    store.profiles[0].binding.sha256 = "f" * 64
    two = _store(tmp_path, "b", (store, sidecar))
    with pytest.raises(MergeError, match=r"profile solo .* binding SHA-256 f{64} does not match"):
        merge_stores([one, two], fleet)
    store, sidecar = make_pair(["solo"])
    sidecar.profiles[0].evidence.after = {**sidecar.profiles[0].evidence.after, "version": "x"}
    three = _store(tmp_path, "c", (store, sidecar))
    with pytest.raises(MergeError, match="evidence changed during the sweep"):
        merge_stores([one, three], fleet)
    store, sidecar = make_pair(["solo"])
    sidecar.profiles[0].evidence.before = {}
    four = _store(tmp_path, "d", (store, sidecar))
    with pytest.raises(MergeError, match="evidence before/after missing"):
        merge_stores([one, four], fleet)
