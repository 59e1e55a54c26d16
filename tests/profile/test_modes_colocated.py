"""``--colocated``: neighbour traffic on the target's shared-GPU peer, through the real command."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from narwhal_sim.testing import SimFleet, start_sim_fleet

from ._command import run_profile_command
from ._modes import IIDS, SWEEP, load, samples_of, wait_idle, write_fleet

pytestmark = pytest.mark.slow

NEIGHBOURS = {
    "--neighbour-prefill-rps": "20",
    "--neighbour-decode-rps": "20",
    "--neighbour-prefill-tokens": "256",
    "--neighbour-decode-input-tokens": "128",
    "--neighbour-decode-output-tokens": "64",
}


def _neighbour_args() -> list[str]:
    return ["--colocated", *(x for pair in NEIGHBOURS.items() for x in pair)]


def _tpot(store: Path, input_len: int, concurrency: int) -> float:
    (entry,) = load(samples_of(store))["profiles"]
    values = [
        c["tpot_s"]
        for c in entry["decode_samples"]
        if c["input_len"] == input_len and c["concurrency"] == concurrency and c["valid"]
    ]
    assert values, entry["decode_samples"]
    return sum(values) / len(values)


@pytest.fixture(scope="module")
def real_time_sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimFleet]:
    """The two engines of ``sim`` in real time: 5 ms steps leave a loaded machine's simulator slack
    (at time scale 4 a starved simulator stretched the solo steps and hid the neighbour's share)."""
    engines = [{"iid": iid, "shared_device": {"group": "g0"}} for iid in IIDS]
    workdir = tmp_path_factory.mktemp("colocated-sim")
    with start_sim_fleet(workdir, engines, seed=3) as fleet:
        yield fleet


def test_neighbour_load_raises_target_tpot(real_time_sim: SimFleet, tmp_path: Path) -> None:
    """The decode target's TPOT under a busy mixed neighbour clearly exceeds its solo TPOT.

    The neighbour's 64-token requests last ~0.7 s each at 20 per second, so by design it is
    decoding throughout the target's cohorts (each of its steps adds ~5 ms to the target's).
    """
    sim = real_time_sim
    roles = {"g0.a": "mixed", "g0.b": "decode"}
    solo_fleet = write_fleet(tmp_path / "solo", sim, roles, store="solo.json")
    colo_fleet = write_fleet(tmp_path / "colo", sim, roles, store="colo.json")
    wait_idle(sim)
    solo = run_profile_command("--fleet", solo_fleet, "--only", "g0.b", *SWEEP)
    assert solo.returncode == 0, solo.stderr
    colo = run_profile_command("--fleet", colo_fleet, "--only", "g0.b", *SWEEP, *_neighbour_args())
    assert colo.returncode == 0, colo.stderr
    solo_store, colo_store = tmp_path / "solo" / "solo.json", tmp_path / "colo" / "colo.json"
    solo_tpot, colo_tpot = _tpot(solo_store, 512, 8), _tpot(colo_store, 512, 8)
    assert colo_tpot > 1.3 * solo_tpot, (solo_tpot, colo_tpot)
    (profile,) = load(colo_store)["profiles"]
    assert profile["colocation"] == {
        "prefill_rps": 20.0,
        "decode_rps": 20.0,
        "prefill_tokens": 256,
        "decode_input_tokens": 128,
        "decode_output_tokens": 64,
    }
    assert load(solo_store)["profiles"][0]["colocation"] is None
    (entry,) = load(samples_of(colo_store))["profiles"]
    (record,) = entry["neighbours"]
    assert record["iid"] == "g0.a" and record["role"] == "mixed"
    assert record["offered_rps"] == 20.0 and record["errors"] == []
    assert record["completions"] > 0 and record["achieved_rps"] > 0
    assert load(samples_of(solo_store))["profiles"][0]["neighbours"] == []


def test_stalled_neighbour_rejects_profile(sim: SimFleet, tmp_path: Path) -> None:
    """A neighbour that completes nothing during the target's interval rejects the profile."""
    fleet = write_fleet(tmp_path, sim, {"g0.a": "prefill", "g0.b": "decode"}, store="s.json")
    wait_idle(sim)
    sim.set_faults("g0.a", stall=True)
    try:
        done: Any = run_profile_command(
            "--fleet", fleet, "--only", "g0.b", *SWEEP, *_neighbour_args()
        )
    finally:
        sim.set_faults("g0.a", stall=None)
        wait_idle(sim)
    assert done.returncode == 1, done.stderr
    assert "neighbour g0.a" in done.stderr
    assert "a stalled or failed neighbour rejects that profile's measured role mix" in done.stderr
    assert not (tmp_path / "s.json").exists() and not (tmp_path / "s.samples.json").exists()
