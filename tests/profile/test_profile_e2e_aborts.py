"""End-to-end aborts: each of the reference's stop conditions, restarts and contract mismatches."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import pytest

from narwhal_sim.testing import SimFleet, sim_config
from narwhal_store import read_store

from ._command import interrupt_once_written

if TYPE_CHECKING:
    from .conftest import Kit

pytestmark = pytest.mark.slow

ONE_ENGINE: list[dict[str, Any]] = [{"iid": "e0", "role": "mixed"}]


def _limits_file(folder: Path, max_num_seqs: int) -> Path:
    """A limits file capping engine e0 at ``max_num_seqs``."""
    path = folder / "limits.json"
    doc = {
        "format": "narwhal.limits",
        "format_version": 1,
        "engines": {"e0": {"max_num_seqs": max_num_seqs}},
    }
    path.write_bytes(orjson.dumps(doc))
    return path


def _nothing_written(fleet: SimFleet) -> bool:
    return not (fleet.fleet_path.parent / "profiles").exists()


def test_health_503_aborts_before_measuring(kit: Kit, sim_factory: Callable[..., SimFleet]) -> None:
    """A /health answer other than 200 on any selected engine aborts before any measurement."""
    fleet = sim_factory()
    fleet.set_faults("g0.decode", health_status=503)
    done = kit.run("--fleet", fleet.fleet_path, *kit.small_sweep)
    assert done.returncode == 1
    assert done.stderr.startswith("narwhal-profile: error: engine g0.decode: /health failed")
    assert "HTTP 503" in done.stderr
    assert "Traceback" not in done.stderr
    assert _nothing_written(fleet)
    assert fleet.state("g0.prefill")["device_steps"] == 0  # g0.prefill was never measured


@pytest.mark.parametrize("bad", [0, "missing"])
def test_bad_max_model_len_from_tokenize(
    kit: Kit, sim_factory: Callable[..., SimFleet], bad: object
) -> None:
    """A /tokenize reply without a positive max_model_len fails max_model_len validation."""
    fleet = sim_factory(ONE_ENGINE)
    fleet.set_faults("e0", tokenize_max_model_len=bad)
    done = kit.run("--fleet", fleet.fleet_path, *kit.small_sweep)
    assert done.returncode == 1
    assert "engine e0" in done.stderr
    assert "fails max_model_len validation" in done.stderr
    assert _nothing_written(fleet)


def test_tokenize_disagreeing_with_models(kit: Kit, sim_factory: Callable[..., SimFleet]) -> None:
    """/tokenize and /v1/models giving different max_model_len values abort the run."""
    fleet = sim_factory(ONE_ENGINE)
    fleet.set_faults("e0", tokenize_max_model_len=4096)
    done = kit.run("--fleet", fleet.fleet_path, *kit.small_sweep)
    assert done.returncode == 1
    assert "fails max_model_len validation" in done.stderr
    assert "4096" in done.stderr
    assert _nothing_written(fleet)


def test_small_max_model_len_leaves_too_few_points(
    kit: Kit, sim_factory: Callable[..., SimFleet]
) -> None:
    """An engine whose live max_model_len keeps fewer than three prefill lengths aborts."""
    fleet = sim_factory(ONE_ENGINE, sim_config=sim_config(e0={"max_model_len": 1500}))
    done = kit.run("--fleet", fleet.fleet_path)  # default lengths: only 256, 512, 1024 fit
    assert done.returncode == 1
    assert "engine limits leave too few sweep points" in done.stderr
    assert "decode input length(s) [512]" in done.stderr
    assert _nothing_written(fleet)


def test_limits_file_leaves_too_few_concurrencies(
    kit: Kit, sim_factory: Callable[..., SimFleet], tmp_path: Path
) -> None:
    """A max_num_seqs limit of 1 leaves one concurrency level, which aborts the run."""
    fleet = sim_factory(ONE_ENGINE)
    limits = _limits_file(tmp_path, 1)
    done = kit.run("--fleet", fleet.fleet_path, "--limits", limits, *kit.small_sweep)
    assert done.returncode == 1
    assert "decode concurrency level(s) [1]" in done.stderr
    assert _nothing_written(fleet)


def test_limits_file_adds_the_limit_as_a_point(
    kit: Kit, sim_factory: Callable[..., SimFleet], tmp_path: Path
) -> None:
    """With --limits, candidates above the limit are dropped and the limit itself is measured."""
    fleet = sim_factory(ONE_ENGINE)
    limits = _limits_file(tmp_path, 3)
    done = kit.run(
        "--fleet", fleet.fleet_path, "--limits", limits, *kit.prefill_lens, *kit.decode_tokens,
        "--decode-input-lens", "512,2048", "--decode-concurrency", "1,2,4,8",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    sidecar = kit.load(kit.outputs(fleet)[1])["profiles"][0]
    assert sidecar["settings"]["decode_concurrency"] == [1, 2, 3]
    assert sidecar["settings"]["limits_applied"] == {"max_num_seqs": 3}
    assert sorted({c["concurrency"] for c in sidecar["decode_samples"]}) == [1, 2, 3]


def test_noisy_engine_fails_the_prefill_gates(
    kit: Kit, sim_factory: Callable[..., SimFleet]
) -> None:
    """Very noisy timings give a prefill fit over the 20% mean / 50% worst gates: abort, no file."""
    fleet = sim_factory(ONE_ENGINE)
    fleet.set_faults("e0", noise=10.0)
    done = kit.run(  # the eight default prefill lengths
        "--fleet",
        fleet.fleet_path,
        "--decode-input-lens",
        "512,2048",
        "--decode-concurrency",
        "1,4",
    )
    assert done.returncode == 1
    assert "engine e0: the representative prefill fit exceeds" in done.stderr
    assert "% mean error" in done.stderr or "% worst-point error" in done.stderr
    assert _nothing_written(fleet)


def _change_second_engine_mid_sweep(
    kit: Kit, fleet: SimFleet, change: Callable[[], object]
) -> tuple[int, str]:
    """Run the small sweep; ``change`` g0.decode as soon as its own sweep has started."""
    store_path, _ = kit.outputs(fleet)
    changed = threading.Event()

    def watch() -> None:
        # g0.prefill is measured first; once its profile is written, the first request seen on
        # g0.decode means g0.decode's sweep (and its evidence read) has started.
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not changed.is_set():
            if store_path.exists():
                state = fleet.state("g0.decode")
                if state["running"] or state["waiting"]:
                    change()
                    changed.set()
                    return
            time.sleep(0.002)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    done = kit.run("--fleet", fleet.fleet_path, *kit.small_sweep, "--prefill-repeats", "8")
    changed.set()
    watcher.join(timeout=5)
    return done.returncode, done.stderr


def test_restart_mid_sweep_discards_the_engine(
    kit: Kit, sim_factory: Callable[..., SimFleet]
) -> None:
    """An engine restarted during its sweep aborts the run naming it; earlier engines are kept."""
    fleet = sim_factory()
    code, stderr = _change_second_engine_mid_sweep(kit, fleet, lambda: fleet.restart("g0.decode"))
    assert code == 1
    assert "engine g0.decode: the engine restarted during its sweep" in stderr
    kept = read_store(kit.outputs(fleet)[0])
    assert [p.key.engine for p in kept.store.profiles] == ["g0.prefill"]


def test_contract_broken_mid_sweep_discards_the_engine(
    kit: Kit, sim_factory: Callable[..., SimFleet]
) -> None:
    """A contract that no longer holds after an engine's sweep aborts; earlier engines are kept."""
    engines = [{**e, "engine_contract": {"version": "0.11.0"}} for e in kit.two_engines]
    fleet = sim_factory(engines)
    code, stderr = _change_second_engine_mid_sweep(
        kit, fleet, lambda: fleet.set_faults("g0.decode", version="0.12.9")
    )
    assert code == 1
    assert "engine g0.decode: engine contract mismatch on 'version'" in stderr
    assert "live '0.12.9' after its sweep; its samples were discarded" in stderr
    kept = read_store(kit.outputs(fleet)[0])
    assert [p.key.engine for p in kept.store.profiles] == ["g0.prefill"]
    assert kept.store.profiles[0].binding.kind == "attestation"


def test_contract_mismatch_aborts(kit: Kit, sim_factory: Callable[..., SimFleet]) -> None:
    """An engine_contract whose version differs from the live engine aborts naming both values."""
    engines = [{"iid": "e0", "role": "mixed", "engine_contract": {"version": "0.11.0"}}]
    fleet = sim_factory(engines, sim_config=sim_config(e0={"version": "0.12.1"}))
    done = kit.run("--fleet", fleet.fleet_path, *kit.small_sweep)
    assert done.returncode == 1
    assert "engine e0: engine contract mismatch on 'version'" in done.stderr
    assert "expected '0.11.0', live '0.12.1'" in done.stderr
    assert _nothing_written(fleet)


def test_contract_that_holds_binds_an_attestation(
    kit: Kit, sim_factory: Callable[..., SimFleet]
) -> None:
    """With a matching engine_contract the profile is bound to a verified attestation."""
    engines = [
        {"iid": "e0", "role": "mixed", "engine_contract": {"version": "0.12.1", "block_size": 16}}
    ]
    fleet = sim_factory(engines, sim_config=sim_config(e0={"version": "0.12.1"}))
    done = kit.run("--fleet", fleet.fleet_path, *kit.small_sweep)
    assert done.returncode == 0, done.stderr
    store_path, sidecar_path = kit.outputs(fleet)
    profile = read_store(store_path).store.profiles[0]
    assert profile.binding.kind == "attestation"
    evidence = kit.load(sidecar_path)["profiles"][0]["evidence"]["before"]
    assert evidence["contract"] == {"version": "0.12.1", "block_size": 16}


def test_interrupt_keeps_finished_profiles(kit: Kit, sim_factory: Callable[..., SimFleet]) -> None:
    """Ctrl-C after the first engine completed exits 130 and keeps that engine's profile."""
    fleet = sim_factory()
    store_path, _ = kit.outputs(fleet)
    done = interrupt_once_written(
        store_path, "--fleet", fleet.fleet_path, *kit.small_sweep, "--prefill-repeats", "30"
    )
    stdout, stderr = done.stdout, done.stderr
    assert done.returncode == 130, stderr
    assert "interrupted; 1 finished profile(s) kept" in stderr
    assert stdout == ""
    assert [p.key.engine for p in read_store(store_path).store.profiles] == ["g0.prefill"]


def test_queued_cohorts_are_invalid_and_left_out(
    kit: Kit, sim_factory: Callable[..., SimFleet]
) -> None:
    """Cohorts larger than the engine's batch wait in its queue: recorded invalid, not fitted."""
    fleet = sim_factory(ONE_ENGINE, sim_config=sim_config(e0={"max_num_seqs": 2}))
    done = kit.run(
        "--fleet", fleet.fleet_path, *kit.prefill_lens, *kit.decode_tokens,
        "--decode-input-lens", "512,2048", "--decode-concurrency", "1,2,6",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    store_path, sidecar_path = kit.outputs(fleet)
    cohorts = kit.load(sidecar_path)["profiles"][0]["decode_samples"]
    invalid = [c for c in cohorts if not c["valid"]]
    assert sorted({c["concurrency"] for c in invalid}) == [6]
    assert all("raise --decode-tokens" in c["reason"] for c in invalid)
    fit = kit.load(store_path)["profiles"][0]["decode_fit"]
    assert fit["domain"]["concurrency"] == [1, 2]
    warnings = [line for line in done.stderr.splitlines() if "left out of the fit" in line]
    assert len(warnings) == 1, done.stderr
    assert warnings[0].startswith("narwhal-profile: warning: e0: 2 decode point(s) left out")
    assert "input 512 x 6" in warnings[0] and "input 2048 x 6" in warnings[0]


def test_too_few_usable_cohorts_abort(kit: Kit, sim_factory: Callable[..., SimFleet]) -> None:
    """When invalid cohorts leave one concurrency level, the run aborts naming the engine."""
    fleet = sim_factory(ONE_ENGINE, sim_config=sim_config(e0={"max_num_seqs": 1}))
    done = kit.run(
        "--fleet", fleet.fleet_path, *kit.prefill_lens, *kit.decode_tokens,
        "--decode-input-lens", "512,2048", "--decode-concurrency", "1,4",
    )  # fmt: skip
    assert done.returncode == 1
    assert "engine e0: usable decode cohorts cover concurrency levels [1]" in done.stderr
    assert _nothing_written(fleet)


def test_fleet_model_not_served_aborts_naming_the_engine(
    kit: Kit, sim_factory: Callable[..., SimFleet]
) -> None:
    """A fleet entry asking for a model the engine does not serve aborts (exit 1, code "model")
    before measuring, naming the engine, the model and what is served; nothing is written."""
    fleet = sim_factory(ONE_ENGINE)
    doc = orjson.loads(fleet.fleet_path.read_bytes())
    doc["engines"][0]["model"] = "not-served"
    wrong = fleet.fleet_path.with_name("fleet-wrong-model.json")
    wrong.write_bytes(orjson.dumps(doc))
    done = kit.run("--fleet", wrong, *kit.small_sweep, "--format", "json")
    assert done.returncode == 1, done.stdout + done.stderr
    result = done.result()
    assert result["error"]["code"] == "model" and result["error"]["engine"] == "e0"
    assert "engine e0 does not serve model 'not-served' (served: " in result["error"]["message"]
    assert not (wrong.parent / "profiles").exists()
    assert fleet.state("e0")["device_steps"] == 0
