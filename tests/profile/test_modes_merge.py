"""``--merge``: role mixes measured separately on the simulator, combined by the real command."""

from __future__ import annotations

import hashlib
from pathlib import Path

import orjson
import pytest

from narwhal_store import read_store

from ._command import ProfileRun, run_profile_command
from ._modes import (
    Measured,
    copy_store,
    interrupt_between_renames,
    load,
    run_in_process,
    samples_of,
)

pytestmark = pytest.mark.slow


def _merge(fleet: Path, inputs: list[Path], out: Path, *, subprocess: bool = False) -> ProfileRun:
    """The merge command: as a subprocess, or in-process (same entry point, no start-up cost)."""
    args: list[str | Path] = ["--fleet", fleet]
    for path in inputs:
        args += ["--merge", path]
    run = run_profile_command if subprocess else run_in_process
    return run(*args, "--out", out)


def _no_output(out: Path) -> bool:
    return not out.exists() and not samples_of(out).exists()


def test_merge_two_role_mixes(measured: Measured, tmp_path: Path) -> None:
    """Two stores of different role mixes merge into one verified store with every profile."""
    out = tmp_path / "combined.json"
    done = _merge(measured.fleet_a, [measured.store_a, measured.store_b], out, subprocess=True)
    assert done.returncode == 0, done.stderr
    merged = read_store(out)  # the merged pair verifies
    labels = [p.key.label() for p in merged.store.profiles]  # an iid occurs under two role mixes
    done.success(f"merged 4 measured profiles to {out}", labels)
    assert merged.store.mode == "merge" and merged.sidecar.mode == "merge"
    keys = sorted((p.key.engine, p.key.target_role) for p in merged.store.profiles)
    assert keys == [
        ("g0.a", "decode"),
        ("g0.a", "prefill"),
        ("g0.b", "decode"),
        ("g0.b", "prefill"),
    ]
    sources = {(s.kind, s.path): s.sha256 for s in merged.sidecar.sources}
    for store in (measured.store_a, measured.store_b):
        for kind, path in (("store", store), ("samples", samples_of(store))):
            assert sources[(kind, str(path))] == hashlib.sha256(path.read_bytes()).hexdigest()
    originals = load(measured.store_a)["profiles"] + load(measured.store_b)["profiles"]
    assert load(out)["profiles"] == originals
    side = load(samples_of(out))["profiles"]
    assert (
        side
        == load(samples_of(measured.store_a))["profiles"]
        + load(samples_of(measured.store_b))["profiles"]
    )


def test_merge_refuses_duplicated_key(measured: Measured, tmp_path: Path) -> None:
    """The same key in two inputs is refused, naming the profile and both inputs."""
    twin = copy_store(measured.store_a, tmp_path / "twin", "split-1-again.json")
    out = tmp_path / "out.json"
    done = _merge(measured.fleet_a, [measured.store_a, twin], out)
    assert done.returncode == 2
    assert "g0.a (group g0" in done.stderr
    assert str(measured.store_a) in done.stderr and str(twin) in done.stderr
    assert _no_output(out)


def test_merge_refuses_missing_coverage(measured: Measured, tmp_path: Path) -> None:
    """A configured engine that no input covers is refused, naming the engine."""
    doc = load(measured.fleet_a)
    doc["engines"].append({"iid": "g1.solo", "url": "http://127.0.0.1:9", "role": "mixed"})
    fleet = tmp_path / "fleet.json"
    fleet.write_bytes(orjson.dumps(doc))
    out = tmp_path / "out.json"
    done = _merge(fleet, [measured.store_a, measured.store_b], out)
    assert done.returncode == 2
    assert "g1.solo" in done.stderr and "not covered" in done.stderr
    assert _no_output(out)


def test_merge_refuses_tampered_sidecar(measured: Measured, tmp_path: Path) -> None:
    """An input whose sidecar was edited is refused, naming the input and the profile."""
    store = copy_store(measured.store_b, tmp_path / "in", "b.json")
    side = load(samples_of(store))
    side["profiles"][0]["decode_samples"][0]["streams"][0]["chunk_ns"][1] += 1000
    samples_of(store).write_bytes(orjson.dumps(side, option=orjson.OPT_INDENT_2))
    out = tmp_path / "out.json"
    done = _merge(measured.fleet_a, [measured.store_a, store], out, subprocess=True)
    assert done.returncode == 2
    engine = side["profiles"][0]["key"]["engine"]
    assert f"--merge input {store}" in done.stderr
    assert f"profile {engine} (group g0" in done.stderr and "altered" in done.stderr
    assert _no_output(out)


def test_merge_refuses_sidecar_edited_outside_profiles(measured: Measured, tmp_path: Path) -> None:
    """A sidecar changed outside its profile entries fails the store's recorded SHA-256."""
    store = copy_store(measured.store_b, tmp_path / "in", "b.json")
    side = load(samples_of(store))
    side["created_at"] = "2001-01-01T00:00:00+00:00"
    samples_of(store).write_bytes(orjson.dumps(side, option=orjson.OPT_INDENT_2))
    out = tmp_path / "out.json"
    done = _merge(measured.fleet_a, [measured.store_a, store], out)
    assert done.returncode == 2
    assert f"--merge input {store}" in done.stderr and "SHA-256" in done.stderr
    assert _no_output(out)


def test_merge_refuses_missing_sidecar(measured: Measured, tmp_path: Path) -> None:
    """An input without its sidecar is refused, naming the input and the missing sidecar."""
    store = copy_store(measured.store_b, tmp_path / "in", "b.json", sidecar=False)
    out = tmp_path / "out.json"
    done = _merge(measured.fleet_a, [measured.store_a, store], out)
    assert done.returncode == 2
    assert f"--merge input {store}" in done.stderr and str(samples_of(store)) in done.stderr
    assert _no_output(out)


def test_merge_refuses_one_input(measured: Measured, tmp_path: Path) -> None:
    """A single --merge is refused (exit 2)."""
    out = tmp_path / "out.json"
    done = _merge(measured.fleet_a, [measured.store_a], out)
    assert done.returncode == 2
    assert "--merge" in done.stderr and "twice" in done.stderr
    assert _no_output(out)


@pytest.mark.parametrize("which", ["store", "sidecar"])
def test_merge_refuses_existing_out(measured: Measured, tmp_path: Path, which: str) -> None:
    """An existing --out store or sidecar is refused and left untouched."""
    out = tmp_path / "out.json"
    existing = out if which == "store" else samples_of(out)
    existing.write_bytes(b"keep\n")
    done = _merge(measured.fleet_a, [measured.store_a, measured.store_b], out)
    assert done.returncode == 2
    assert existing.read_bytes() == b"keep\n"
    assert not (samples_of(out) if which == "store" else out).exists()


@pytest.mark.parametrize("which", ["store", "sidecar"])
def test_merge_refuses_symlinked_out(measured: Measured, tmp_path: Path, which: str) -> None:
    """A symlinked --out store or sidecar is refused; the link target is not created."""
    out = tmp_path / "out.json"
    target = tmp_path / "target.json"
    (out if which == "store" else samples_of(out)).symlink_to(target)
    done = _merge(measured.fleet_a, [measured.store_a, measured.store_b], out)
    assert done.returncode == 2
    assert "symlink" in done.stderr
    assert not target.exists()


def test_refit_of_a_merged_store(measured: Measured, tmp_path: Path) -> None:
    """A merged store's sidecar refits every role-mix profile and names the merge as its source."""
    merged = tmp_path / "combined.json"
    assert _merge(measured.fleet_a, [measured.store_a, measured.store_b], merged).returncode == 0
    out = tmp_path / "refitted.json"
    done = run_in_process(
        "--fleet", measured.fleet_a, "--refit-samples", samples_of(merged), "--out", out
    )
    assert done.returncode == 0, done.stderr
    labels = [p.key.label() for p in read_store(out).store.profiles]
    done.success(f"refitted 4 profile(s) to {out}", labels)
    before = [p["prefill_fit"] for p in load(merged)["profiles"]]
    assert [p["prefill_fit"] for p in load(out)["profiles"]] == before
    sources = load(samples_of(out))["sources"]
    assert {s["path"] for s in sources} == {str(merged), str(samples_of(merged))}


def test_merge_finishes_an_interrupted_write_of_an_input(
    measured: Measured, tmp_path: Path
) -> None:
    """An input whose sidecar exists only under its pending name is finished, then merged."""
    store = copy_store(measured.store_b, tmp_path / "in", "b.json")
    pending = interrupt_between_renames(store)
    out = tmp_path / "out.json"
    done = _merge(measured.fleet_a, [measured.store_a, store], out)
    assert done.returncode == 0, done.stderr
    assert samples_of(store).is_file() and not pending.exists()
    assert read_store(out).store.mode == "merge"
