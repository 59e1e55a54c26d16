"""``--refit-samples``: TTFT refits from retained samples, run through the real command."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest

import narwhal_fit
from narwhal_fit import PrefillFit
from narwhal_profile_cli import cli
from narwhal_profile_cli.results._refit import refit_from_samples
from narwhal_store import load_fleet, read_store, write_store

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


def _refit(fleet: Path, samples: Path, out: Path, *, subprocess: bool = False) -> ProfileRun:
    """The refit command: as a subprocess, or in-process (same entry point, no start-up cost)."""
    run = run_profile_command if subprocess else run_in_process
    return run("--fleet", fleet, "--refit-samples", samples, "--out", out)


def _coefficients(store: Path) -> dict[str, dict[str, float]]:
    return {p["key"]["engine"]: p["prefill_fit"]["coefficients"] for p in load(store)["profiles"]}


def _rewrite(src: Path, dst: Path, change: Any) -> Path:
    """A consistent store at ``dst`` with sidecar entries edited by ``change`` (new digests)."""
    loaded = read_store(src)
    sidecar = loaded.sidecar.model_copy(deep=True)
    for entry in sidecar.profiles:
        change(entry)
    write_store(dst, loaded.store, sidecar, mode="fresh")
    return dst


def test_refit_reproduces_coefficients_and_keeps_samples(
    measured: Measured, tmp_path: Path
) -> None:
    """An unmodified sidecar refits to identical TTFT fits; decode fits, samples, evidence kept."""
    source = samples_of(measured.store_a)
    out = tmp_path / "refitted.json"
    done = _refit(measured.fleet_a, source, out, subprocess=True)
    assert done.returncode == 0, done.stderr
    done.success(f"refitted 2 profile(s) to {out}", ["g0.a", "g0.b"])
    old, new = load(measured.store_a), load(out)
    assert new["mode"] == "refit"
    for before, after in zip(old["profiles"], new["profiles"], strict=True):
        assert after["key"] == before["key"]
        assert after["prefill_fit"] == before["prefill_fit"]
        assert after["decode_fit"] == before["decode_fit"]
        assert after["binding"] == before["binding"]
    old_side, new_side = load(source), load(samples_of(out))
    assert new_side["mode"] == "refit"
    assert new_side["profiles"] == old_side["profiles"]
    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    assert {"kind": "samples", "path": str(source), "sha256": digest} in new_side["sources"]
    assert read_store(out).store.mode == "refit"  # the pair verifies


def _doubling_fit(real: Any) -> Any:
    def fit(lengths: Sequence[int], ttft_s: Sequence[float]) -> PrefillFit:
        return real(lengths, [2.0 * t for t in ttft_s])

    return fit


def test_refit_follows_a_changed_fit(
    measured: Measured, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    """When narwhal-fit's prefill fit behaves differently, the refitted coefficients change."""
    monkeypatch.setattr(narwhal_fit, "fit_prefill", _doubling_fit(narwhal_fit.fit_prefill))
    out = tmp_path / "changed.json"
    args = ["--fleet", str(measured.fleet_a), "--refit-samples", str(samples_of(measured.store_a))]
    assert cli.run([*args, "--out", str(out)]) == 0, capsys.readouterr().err
    old, new = _coefficients(measured.store_a), _coefficients(out)
    assert new != old
    for iid, coefficients in old.items():
        for name, value in coefficients.items():
            assert new[iid][name] == pytest.approx(2.0 * value, rel=1e-6, abs=1e-15)
    assert [p["decode_fit"] for p in load(out)["profiles"]] == [
        p["decode_fit"] for p in load(measured.store_a)["profiles"]
    ]


def test_refit_fit_is_injectable(measured: Measured, tmp_path: Path) -> None:
    """``refit_from_samples(fit_prefill=...)`` uses the given fit function."""
    fleet = load_fleet(measured.fleet_a)
    out = tmp_path / "injected.json"
    written = refit_from_samples(
        fleet,
        samples_of(measured.store_a),
        out,
        fit_prefill=_doubling_fit(narwhal_fit.fit_prefill),
    )
    assert len(written.store.profiles) == 2
    old = _coefficients(measured.store_a)
    assert _coefficients(out)["g0.a"]["a"] == pytest.approx(2.0 * old["g0.a"]["a"])


def test_refit_refuses_missing_coverage(measured: Measured, tmp_path: Path) -> None:
    """A fleet engine without samples refuses the refit (exit 2) and names the engine."""
    extra = {"iid": "x.extra", "url": "http://127.0.0.1:9", "role": "decode"}
    fleet = tmp_path / "fleet.json"
    doc = load(measured.fleet_a)
    doc["engines"].append(extra)
    fleet.write_bytes(orjson.dumps(doc))
    out = tmp_path / "out.json"
    done = _refit(fleet, samples_of(measured.store_a), out)
    assert done.returncode == 2
    assert "x.extra" in done.stderr and "covering every fleet engine" in done.stderr
    assert not out.exists() and not samples_of(out).exists()


def test_refit_refuses_tampered_samples(measured: Measured, tmp_path: Path) -> None:
    """An edited raw timing breaks the store's samples digest: exit 2 naming the profile."""
    store = copy_store(measured.store_a, tmp_path / "in", "profiles.json")
    side = load(samples_of(store))
    side["profiles"][1]["prefill_samples"][0]["ttft_s"][0] *= 0.5
    samples_of(store).write_bytes(orjson.dumps(side, option=orjson.OPT_INDENT_2))
    out = tmp_path / "out.json"
    done = _refit(measured.fleet_a, samples_of(store), out, subprocess=True)
    assert done.returncode == 2
    engine = side["profiles"][1]["key"]["engine"]
    assert f"profile {engine} (group g0" in done.stderr and "altered" in done.stderr
    assert not out.exists() and not samples_of(out).exists()


def test_refit_refuses_changed_evidence(measured: Measured, tmp_path: Path) -> None:
    """Samples whose evidence changed during the sweep (another generation) are refused."""

    def restart(entry: Any) -> None:
        if entry.key.engine == "g0.b":
            entry.evidence.after["process_start_time_seconds"] = 1.0

    store = _rewrite(measured.store_a, tmp_path / "in" / "profiles.json", restart)
    out = tmp_path / "out.json"
    done = _refit(measured.fleet_a, samples_of(store), out)
    assert done.returncode == 2
    assert "profile g0.b" in done.stderr and "evidence changed" in done.stderr
    assert not out.exists()


def test_refit_gates_abort(measured: Measured, tmp_path: Path) -> None:
    """Retained timings that no quadratic fits abort with the reference's gate wording (exit 1)."""

    def noisy(entry: Any) -> None:
        for sample in entry.prefill_samples:
            if sample.length == 8192:  # the middle length of the sweep
                sample.ttft_s = [t * 8.0 for t in sample.ttft_s]

    store = _rewrite(measured.store_a, tmp_path / "in" / "profiles.json", noisy)
    out = tmp_path / "out.json"
    done = _refit(measured.fleet_a, samples_of(store), out)
    assert done.returncode == 1, done.stderr
    assert "the representative prefill fit exceeds" in done.stderr
    assert "g0.a" in done.stderr
    assert not out.exists() and not samples_of(out).exists()


@pytest.mark.parametrize("which", ["store", "sidecar"])
def test_refit_refuses_existing_out(measured: Measured, tmp_path: Path, which: str) -> None:
    """An existing --out store or sidecar is refused (exit 2) and left untouched."""
    out = tmp_path / "out.json"
    existing = out if which == "store" else samples_of(out)
    existing.write_bytes(b"keep me\n")
    done = _refit(measured.fleet_a, samples_of(measured.store_a), out)
    assert done.returncode == 2
    assert "fresh" in done.stderr
    assert existing.read_bytes() == b"keep me\n"
    assert not (samples_of(out) if which == "store" else out).exists()


@pytest.mark.parametrize("which", ["store", "sidecar"])
def test_refit_refuses_symlinked_out(measured: Measured, tmp_path: Path, which: str) -> None:
    """A symlinked --out store or sidecar is refused (exit 2); its target is not created."""
    out = tmp_path / "out.json"
    target = tmp_path / "elsewhere.json"
    (out if which == "store" else samples_of(out)).symlink_to(target)
    done = _refit(measured.fleet_a, samples_of(measured.store_a), out)
    assert done.returncode == 2
    assert "symlink" in done.stderr
    assert not target.exists()


def test_refit_finishes_an_interrupted_write_of_its_input(
    measured: Measured, tmp_path: Path
) -> None:
    """A sidecar that exists only under its pending name (a write killed between its renames) is
    renamed into place, then refitted; the new sidecar records the usual sidecar path."""
    store = copy_store(measured.store_a, tmp_path / "in", "a.json")
    side = samples_of(store)
    digest = hashlib.sha256(side.read_bytes()).hexdigest()
    pending = interrupt_between_renames(store)
    out = tmp_path / "refitted.json"
    done = _refit(measured.fleet_a, side, out)
    assert done.returncode == 0, done.stderr
    assert side.is_file() and not pending.exists()
    assert {"kind": "samples", "path": str(side), "sha256": digest} in load(samples_of(out))[
        "sources"
    ]
    assert read_store(out).store.mode == "refit"
