"""--parallel-groups: GPU groups measured side by side, one engine per group at a time.

Exclusion is judged by the simulator's own stamps, not by wall time: each simulated GPU records
the most engines it stepped at once, and each engine when its first completion arrived and its
last one ended (one event-loop clock for the whole fleet process).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from narwhal_sim.testing import SimFleet
from narwhal_store import read_store

from ._command import interrupt_once_written

if TYPE_CHECKING:
    from .conftest import Kit

pytestmark = pytest.mark.slow

#: Several groups stream at once on a busy machine: slower simulated time and longer streams keep
#: every cohort's streams overlapping by design (as the colocated tests do).
TIME_SCALE = 4.0
SWEEP = ("--prefill-lens", "2048,8192,16384", "--decode-input-lens", "512,2048",
         "--decode-concurrency", "1,4", "--decode-tokens", "160")  # fmt: skip


def _groups(*names: str, per_group: int = 2) -> list[dict[str, Any]]:
    roles = ("prefill", "decode", "mixed")
    return [
        {"iid": f"{g}.{roles[i]}", "role": roles[i], "shared_device": {"group": g}}
        for g in names
        for i in range(per_group)
    ]


def _span(fleet: SimFleet, iid: str) -> tuple[float, float]:
    state = fleet.state(iid)
    first, last = state["completions_first_s"], state["completions_last_s"]
    assert first is not None and last is not None, state
    return float(first), float(last)


def test_groups_run_side_by_side_engines_of_a_group_one_at_a_time(
    kit: Kit, sim_factory: Callable[..., SimFleet]
) -> None:
    """Two engines of one GPU are never stepped together; the two GPUs work at the same time."""
    fleet = sim_factory(_groups("g0", "g1"), time_scale=TIME_SCALE)
    done = kit.run("--fleet", fleet.fleet_path, *SWEEP, "--parallel-groups", "2")
    assert done.returncode == 0, done.stderr
    done.success(
        f"wrote 4 profile(s) to {fleet.fleet_path.parent / 'profiles/fleet-profiles.json'}",
        ["g0.prefill", "g0.decode", "g1.prefill", "g1.decode"],
    )
    for iid in ("g0.prefill", "g1.prefill"):
        assert fleet.state(iid)["device_max_engines_per_step"] == 1
    for group in ("g0", "g1"):
        first = _span(fleet, f"{group}.prefill")
        second = _span(fleet, f"{group}.decode")
        assert first[1] <= second[0], (group, first, second)  # one engine after the other
    g0, g1 = _span(fleet, "g0.prefill"), _span(fleet, "g1.prefill")
    assert g0[0] < g1[1] and g1[0] < g0[1], (g0, g1)  # the groups overlapped
    store_path, sidecar_path = kit.outputs(fleet)
    keys = [p.key.engine for p in read_store(store_path).store.profiles]
    assert keys == ["g0.prefill", "g0.decode", "g1.prefill", "g1.decode"]  # fleet order
    settings = [e["settings"] for e in kit.load(sidecar_path)["profiles"]]
    assert {(s["parallel_groups"], s["shard"]) for s in settings} == {(2, None)}


def test_default_is_one_group_at_a_time(kit: Kit, sim_factory: Callable[..., SimFleet]) -> None:
    """Without the option the groups run one after the other, and the sidecar says 1."""
    fleet = sim_factory(_groups("g0", "g1", per_group=1), time_scale=TIME_SCALE)
    done = kit.run("--fleet", fleet.fleet_path, *SWEEP)
    assert done.returncode == 0, done.stderr
    g0, g1 = _span(fleet, "g0.prefill"), _span(fleet, "g1.prefill")
    assert g0[1] <= g1[0], (g0, g1)
    settings = [e["settings"] for e in kit.load(kit.outputs(fleet)[1])["profiles"]]
    assert [s["parallel_groups"] for s in settings] == [1, 1]


@pytest.mark.parametrize("overwrite", [False, True])
def test_failure_stops_the_other_groups_and_keeps_finished_profiles(
    kit: Kit, sim_factory: Callable[..., SimFleet], overwrite: bool
) -> None:
    """g1's second engine fails after its first was written; g0 (stalled) is stopped cleanly.

    With --overwrite, the old outputs were replaced when that first engine completed.
    """
    fleet = sim_factory(_groups("g0", "g1"), time_scale=TIME_SCALE)
    fleet.set_faults("g0.prefill", stall=True)  # g0 stays at work until it is stopped
    fleet.set_faults("g1.decode", http_error={"status": 500, "rate": 1.0})
    extra = []
    if overwrite:
        for old in kit.outputs(fleet):
            old.parent.mkdir(parents=True, exist_ok=True)
            old.write_text("an older store\n")
        extra = ["--overwrite"]
    done = kit.run(
        "--fleet", fleet.fleet_path, *SWEEP, "--parallel-groups", "2", *extra, timeout=180
    )
    assert done.returncode == 1, done.stderr
    assert "engine g1.decode:" in done.stderr and "HTTP 500" in done.stderr, done.stderr
    assert "stopped group g0 mid-sweep (their current engines not written)" in done.stderr
    assert "1 finished profile(s) kept in" in done.stderr
    errors = [line for line in done.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1, done.stderr
    store_path, _ = kit.outputs(fleet)
    assert [p.key.engine for p in read_store(store_path).store.profiles] == ["g1.prefill"]


def test_interrupt_with_parallel_groups_keeps_what_finished(
    kit: Kit, sim_factory: Callable[..., SimFleet]
) -> None:
    """Ctrl-C while g0 is stuck and g1 has written one engine: exit 130, that profile kept."""
    fleet = sim_factory(_groups("g0", "g1"), time_scale=TIME_SCALE)
    fleet.set_faults("g0.prefill", stall=True)
    store_path, _ = kit.outputs(fleet)
    done = interrupt_once_written(
        store_path,
        "--fleet",
        fleet.fleet_path,
        *SWEEP,
        "--parallel-groups",
        "2",
        "--format",
        "json",
    )
    stdout = done.stdout
    assert done.returncode == 130, done.stderr
    kept = [p.key.engine for p in read_store(store_path).store.profiles]
    assert kept[0] == "g1.prefill" and "g0.prefill" not in kept, kept
    assert f'"profiles":{len(kept)}' in stdout
    assert f"interrupted; {len(kept)} finished profile(s) kept" in stdout


def test_colocated_neighbours_stay_in_the_target_group(
    kit: Kit, sim_factory: Callable[..., SimFleet]
) -> None:
    """With groups side by side, each target's neighbour traffic goes to its own GPU's peer only."""
    fleet = sim_factory(_groups("g0", "g1"), time_scale=TIME_SCALE)
    neighbours = ["--colocated", "--neighbour-prefill-rps", "20", "--neighbour-decode-rps", "20",
                  "--neighbour-prefill-tokens", "256", "--neighbour-decode-input-tokens", "128",
                  "--neighbour-decode-output-tokens", "64"]  # fmt: skip
    done = kit.run("--fleet", fleet.fleet_path, *SWEEP, "--parallel-groups", "2", *neighbours)
    assert done.returncode == 0, done.stderr
    entries = kit.load(kit.outputs(fleet)[1])["profiles"]
    assert len(entries) == 4
    for entry in entries:
        target = entry["key"]["engine"]
        group = target.split(".")[0]
        peers = [r["iid"] for r in entry["neighbours"]]
        assert peers == [f"{group}.{'decode' if target.endswith('prefill') else 'prefill'}"]
        assert all(r["completions"] > 0 and r["errors"] == [] for r in entry["neighbours"])
