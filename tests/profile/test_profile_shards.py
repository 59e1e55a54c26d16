"""--shard K/M: a 4-group fleet profiled as 2 shards in 2 processes, then merged."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from narwhal_sim.testing import SimFleet
from narwhal_store import read_store

if TYPE_CHECKING:
    from .conftest import Kit

pytestmark = pytest.mark.slow

#: Several groups stream at once on a busy machine: slower simulated time and longer streams keep
#: every cohort's streams overlapping by design (as the colocated tests do).
TIME_SCALE = 4.0
SWEEP = ("--prefill-lens", "2048,8192,16384", "--decode-input-lens", "512,2048",
         "--decode-concurrency", "1,4", "--decode-tokens", "160")  # fmt: skip

#: Four GPU groups: two shared by a prefill and a decode engine, two with one mixed engine.
FOUR_GROUPS: list[dict[str, Any]] = [
    {"iid": "g0.prefill", "role": "prefill", "shared_device": {"group": "g0"}},
    {"iid": "g0.decode", "role": "decode", "shared_device": {"group": "g0"}},
    {"iid": "g1.prefill", "role": "prefill", "shared_device": {"group": "g1"}},
    {"iid": "g1.decode", "role": "decode", "shared_device": {"group": "g1"}},
    {"iid": "g2.mixed", "role": "mixed", "shared_device": {"group": "g2"}},
    {"iid": "g3.mixed", "role": "mixed", "shared_device": {"group": "g3"}},
]


def test_two_shards_in_two_processes_merge_into_the_whole_fleet(
    kit: Kit, sim_factory: Callable[..., SimFleet]
) -> None:
    """Each shard measures whole groups into its own store; the merge covers every engine once."""
    fleet = sim_factory(FOUR_GROUPS, time_scale=TIME_SCALE)
    folder = fleet.fleet_path.parent / "profiles"
    command = [sys.executable, "-m", "narwhal_profile_cli", "--fleet", str(fleet.fleet_path)]
    procs = [
        subprocess.Popen(
            [*command, *SWEEP, "--shard", f"{k}/2", "--parallel-groups", "2"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for k in (1, 2)
    ]
    outputs = [p.communicate(timeout=240) for p in procs]
    for proc, (_, stderr) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, stderr
    shards = [folder / f"fleet-profiles.shard-{k}-of-2.json" for k in (1, 2)]
    for shard, (stdout, _) in zip(shards, outputs, strict=True):
        assert stdout.splitlines()[-1].startswith("wrote ") and str(shard) in stdout
    engines = [[p.key.engine for p in read_store(s).store.profiles] for s in shards]
    groups = [{e.split(".")[0] for e in share} for share in engines]
    assert groups[0].isdisjoint(groups[1]) and groups[0] | groups[1] == {"g0", "g1", "g2", "g3"}
    by_group = {g: [f["iid"] for f in FOUR_GROUPS if f["iid"].startswith(g + ".")] for g in "g0 g1"}
    for share in engines:  # a shared GPU's engines land in the same shard
        for members in by_group.values():
            assert set(members) <= set(share) or not set(members) & set(share)
    assert sorted(len(e) for e in engines) == [3, 3]  # balanced by engine count
    sidecars = [kit.load(s.with_name(s.stem + ".samples.json")) for s in shards]
    for k, sidecar in enumerate(sidecars, start=1):
        assert {e["settings"]["shard"] for e in sidecar["profiles"]} == {f"{k}/2"}

    merged = folder / "fleet-profiles.json"
    done = kit.run(
        "--fleet", fleet.fleet_path, "--merge", shards[0], "--merge", shards[1], "--out", merged
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == f"merged 6 measured profiles to {merged}"
    keys = [p.key.engine for p in read_store(merged).store.profiles]
    assert sorted(keys) == sorted(f["iid"] for f in FOUR_GROUPS)
    assert len(keys) == len(set(keys))


def test_one_shard_alone_does_not_merge(kit: Kit, sim_factory: Callable[..., SimFleet]) -> None:
    """A merge needs every configured engine: one shard's store with another store is refused."""
    fleet = sim_factory(FOUR_GROUPS[4:], time_scale=TIME_SCALE)
    folder = fleet.fleet_path.parent / "profiles"
    done = kit.run("--fleet", fleet.fleet_path, *SWEEP, "--shard", "1/2")
    assert done.returncode == 0, done.stderr
    shard = folder / "fleet-profiles.shard-1-of-2.json"
    assert [p.key.engine for p in read_store(shard).store.profiles] == ["g2.mixed"]
    again = kit.run(
        "--fleet", fleet.fleet_path, "--merge", shard, "--merge", shard.with_name("x.json"),
        "--out", folder / "all.json",
    )  # fmt: skip
    assert again.returncode == 2
    assert "x.json" in again.stderr
