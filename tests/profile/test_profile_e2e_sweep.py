"""End-to-end live sweeps of simulated engines: the real command, its files and exit codes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import pytest

from narwhal_sim.testing import SimFleet
from narwhal_store import read_store

if TYPE_CHECKING:
    from .conftest import Kit

pytestmark = pytest.mark.slow


def _keys(store: dict[str, Any]) -> list[str]:
    return [p["key"]["engine"] for p in store["profiles"]]


def test_default_sweep_of_two_engines(kit: Kit, sim_factory: Callable[..., SimFleet]) -> None:
    """With default options the command writes one verified profile per engine and exits 0.

    The defaults fix the sweep (prefill from 256 tokens, 64-token streams), so the fleet runs in
    real time (time scale 1, ~30 s an engine): a 256-token prefill then takes ~18 ms and a
    4-stream cohort decodes for ~0.35 s, so a loaded machine's scheduling delays stay small
    against what is measured. At time scale 2 the prefill gate failed once under load (worst
    point 84%), as the reference's gate should for such samples."""
    fleet = sim_factory(time_scale=1.0)
    done = kit.run("--fleet", fleet.fleet_path)
    store_path, sidecar_path = kit.outputs(fleet)
    assert done.returncode == 0, done.stderr
    done.success(f"wrote 2 profile(s) to {store_path}", ["g0.prefill", "g0.decode"])
    loaded = read_store(store_path)  # verifies the sidecar digests
    assert _keys(kit.load(store_path)) == ["g0.prefill", "g0.decode"]
    for profile in loaded.store.profiles:
        assert profile.key.role_split == {"decode": 1, "prefill": 1}
        assert profile.binding.kind == "identity"
        assert profile.prefill_fit.form == "ttft-quadratic-v1"
        assert profile.decode_fit is not None
        assert profile.colocation is None
    sidecar = kit.load(sidecar_path)
    for entry in sidecar["profiles"]:
        settings = entry["settings"]
        assert settings["prefill_lens"] == [256, 512, 1024, 2048, 4096, 8192, 12288, 16384]
        assert settings["decode_input_lens"] == [512, 4096, 8192]
        assert settings["decode_concurrency"] == [1, 4, 16, 48]
        assert (settings["decode_tokens"], settings["prefill_repeats"]) == (64, 3)
        assert [len(s["ttft_s"]) for s in entry["prefill_samples"]] == [3] * 8
        assert len(entry["decode_samples"]) == 3 * 4
        assert entry["evidence"]["before"] == entry["evidence"]["after"]
        for cohort in entry["decode_samples"]:
            assert len(cohort["streams"]) == cohort["concurrency"]
            for stream in cohort["streams"]:
                assert sum(stream["chunk_tokens"]) == 64
            assert cohort["valid"] == (cohort["reason"] is None)
        request_ids = [r for s in entry["prefill_samples"] for r in s["request_ids"]]
        assert len(set(request_ids)) == len(request_ids)
    # Not a terminal: no progress. Only warnings: one line per engine that had decode points left
    # out of its fit (48-stream cohorts may not overlap on a loaded machine), naming each one,
    # and (the time-scaled simulator cannot keep its short steps on a busy machine) decode-fit
    # and bursty-delivery warnings, each naming its engine.
    lines = done.stderr.splitlines()
    assert all(line.startswith("narwhal-profile: warning: g0.") for line in lines), done.stderr
    decode_fit = {p["key"]["engine"]: p["decode_fit"] for p in kit.load(store_path)["profiles"]}
    for iid, fit in decode_fit.items():
        beyond = fit["mean_rel_error"] > 0.2 or fit["worst_rel_error"] > 0.5
        warned = [
            line
            for line in lines
            if line.startswith(f"narwhal-profile: warning: {iid}: decode fit")
        ]
        assert len(warned) == int(beyond), done.stderr
    expected = []
    for entry in sidecar["profiles"]:
        left_out = [c for c in entry["decode_samples"] if not c["valid"]]
        if left_out:
            expected.append((entry["key"]["engine"], left_out))
    lines = [line for line in lines if "left out of the fit" in line]
    assert len(lines) == len(expected), done.stderr
    for line, (iid, left_out) in zip(lines, expected, strict=True):
        assert line.startswith(f"narwhal-profile: warning: {iid}: {len(left_out)} decode point(s)")
        for cohort in left_out:
            assert f"input {cohort['input_len']} x {cohort['concurrency']}: " in line


def test_only_selects_one_engine(kit: Kit, sim_factory: Callable[..., SimFleet]) -> None:
    """`--only` measures just the named engine."""
    fleet = sim_factory()
    done = kit.run("--fleet", fleet.fleet_path, "--only", "g0.decode", *kit.small_sweep)
    store_path, _ = kit.outputs(fleet)
    assert done.returncode == 0, done.stderr
    assert _keys(kit.load(store_path)) == ["g0.decode"]
    done.success(f"wrote 1 profile(s) to {store_path}", ["g0.decode"])


def test_only_matching_nothing_aborts(kit: Kit, sim_factory: Callable[..., SimFleet]) -> None:
    """An `--only` value naming no configured engine aborts with exit 1 before writing."""
    fleet = sim_factory()
    done = kit.run("--fleet", fleet.fleet_path, "--only", "nope", *kit.small_sweep)
    assert done.returncode == 1
    assert "the --only selection matches zero configured engines" in done.stderr
    assert "'nope'" in done.stderr
    assert not (fleet.fleet_path.parent / "profiles").exists()


def test_overwrite_rules(kit: Kit, sim_factory: Callable[..., SimFleet]) -> None:
    """Existing outputs are refused without --overwrite; with it they are replaced, and with
    --only the new store holds only the selected profile."""
    fleet = sim_factory()
    store_path, sidecar_path = kit.outputs(fleet)
    first = kit.run("--fleet", fleet.fleet_path, *kit.small_sweep)
    assert first.returncode == 0, first.stderr
    before = (store_path.read_bytes(), sidecar_path.read_bytes())

    refused = kit.run("--fleet", fleet.fleet_path, *kit.small_sweep)
    assert refused.returncode == 2
    assert refused.stderr.startswith("narwhal-profile: error: ")
    assert (store_path.read_bytes(), sidecar_path.read_bytes()) == before

    again = kit.run("--fleet", fleet.fleet_path, "--overwrite", *kit.small_sweep)
    assert again.returncode == 0, again.stderr
    assert store_path.read_bytes() != before[0]
    assert _keys(kit.load(store_path)) == ["g0.prefill", "g0.decode"]

    only = kit.run(
        "--fleet", fleet.fleet_path, "--overwrite", "--only", "g0.prefill", *kit.small_sweep
    )
    assert only.returncode == 0, only.stderr
    assert _keys(kit.load(store_path)) == ["g0.prefill"]
    assert [e["key"]["engine"] for e in kit.load(sidecar_path)["profiles"]] == ["g0.prefill"]
    read_store(store_path)


@pytest.mark.parametrize("which", ["store", "sidecar"])
def test_symlinked_destination_refused(
    kit: Kit, sim_factory: Callable[..., SimFleet], tmp_path: Path, which: str
) -> None:
    """A symlinked store or sidecar is refused (exit 2), also with --overwrite; writes nothing."""
    fleet = sim_factory()
    store_path, sidecar_path = kit.outputs(fleet)
    store_path.parent.mkdir()
    target = tmp_path / "elsewhere.json"
    target.write_bytes(b"{}")
    (store_path if which == "store" else sidecar_path).symlink_to(target)
    for extra in ((), ("--overwrite",)):
        done = kit.run("--fleet", fleet.fleet_path, *extra, *kit.small_sweep)
        assert done.returncode == 2, done.stderr
        assert "symlink" in done.stderr
        assert target.read_bytes() == b"{}"
    assert sorted(p.name for p in store_path.parent.iterdir()) == [
        (store_path if which == "store" else sidecar_path).name
    ]


def test_json_result_on_success_and_failure(kit: Kit, sim_factory: Callable[..., SimFleet]) -> None:
    """--format json prints exactly one result object, on success and on failure."""
    fleet = sim_factory()
    store_path, sidecar_path = kit.outputs(fleet)
    ok = kit.run("--fleet", fleet.fleet_path, "--format", "json", *kit.small_sweep)
    assert ok.returncode == 0, ok.stderr
    result = ok.result()
    fits = result.pop("fits")
    assert [f["engine"] for f in fits] == ["g0.prefill", "g0.decode"]
    for fit in fits:  # the same figures the store holds, per engine
        assert set(fit["prefill"]) == {"mean_rel_error", "worst_rel_error", "worst_point"}
        assert set(fit["decode"]) == {"mean_rel_error", "worst_rel_error", "worst_point"}
    stored = {p["key"]["engine"]: p for p in kit.load(store_path)["profiles"]}
    for fit in fits:
        for part in ("prefill", "decode"):
            doc = stored[fit["engine"]][f"{part}_fit"]
            assert fit[part]["mean_rel_error"] == doc["mean_rel_error"]
            assert fit[part]["worst_rel_error"] == doc["worst_rel_error"]
    assert result == {
        "format": "narwhal.profile.result",
        "format_version": 1,
        "ok": True,
        "mode": "live",
        "path": str(store_path),
        "samples_path": str(sidecar_path),
        "profiles": 2,
        "error": None,
    }
    fleet.set_faults("g0.decode", health_status=503)
    failed = kit.run(
        "--fleet", fleet.fleet_path, "--format", "json", "--overwrite", *kit.small_sweep
    )
    assert failed.returncode == 1
    doc = failed.result()
    assert doc["ok"] is False and doc["mode"] == "live" and doc["profiles"] == 0
    assert doc["error"]["engine"] == "g0.decode"
    assert doc["error"]["code"] == "health"
    assert "503" in doc["error"]["message"]
    usage = kit.run("--fleet", fleet.fleet_path, "--format", "json", "--decode-tokens", "2")
    assert usage.returncode == 2
    assert usage.result()["error"]["code"] == "usage"
    assert orjson.loads(store_path.read_bytes())["profiles"]  # untouched by the failures


COLOCATED = (
    "--colocated",
    "--neighbour-prefill-rps",
    "20",
    "--neighbour-decode-rps",
    "10",
    "--neighbour-prefill-tokens",
    "512",
    "--neighbour-decode-input-tokens",
    "128",
    "--neighbour-decode-output-tokens",
    "16",
)


def test_colocated_sweep_records_neighbours(kit: Kit, sim_factory: Callable[..., SimFleet]) -> None:
    """--colocated loads each target's group peer and records its traffic and the settings.

    The decode cohorts must overlap however slowly a busy machine starts their streams, so this
    sweep runs at time scale 2 with 160-token streams: each window lasts ~0.4 s of real time (at
    the suite's time scale 10 with 64 tokens it was ~40 ms, less than a loaded client's start skew).
    """
    fleet = sim_factory(time_scale=2.0)
    sweep = (*kit.prefill_lens, "--decode-input-lens", "512,2048", "--decode-concurrency", "1,4")
    done = kit.run("--fleet", fleet.fleet_path, *sweep, "--decode-tokens", "160", *COLOCATED)
    assert done.returncode == 0, done.stderr
    store_path, sidecar_path = kit.outputs(fleet)
    profiles = kit.load(store_path)["profiles"]
    assert [p["colocation"]["prefill_rps"] for p in profiles] == [20.0, 20.0]
    entries = {e["key"]["engine"]: e["neighbours"] for e in kit.load(sidecar_path)["profiles"]}
    assert [(r["iid"], r["role"]) for r in entries["g0.prefill"]] == [("g0.decode", "decode")]
    assert [(r["iid"], r["role"]) for r in entries["g0.decode"]] == [("g0.prefill", "prefill")]
    for records in entries.values():
        assert records[0]["completions"] > 0 and records[0]["errors"] == []
