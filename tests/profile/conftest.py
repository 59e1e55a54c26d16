"""Fixtures for narwhal-profile tests: run the real command as a subprocess, start sim fleets; for
the refit, merge and colocated tests (``test_modes_*.py``, helpers in ``_modes.py``), one simulated
shared GPU for the session and two stores measured on it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from narwhal_sim.testing import SimFleet, start_sim_fleet

from ._command import ProfileRun, run_profile_command
from ._modes import IIDS, SWEEP, Measured, write_fleet

#: Simulated time runs this much faster than real time in the end-to-end tests, the modes tests'
#: session engines (``sim``) included. At 4 the shortest TTFT measured (2,048 tokens) is ~13 ms of
#: real time, well above what loopback HTTP on a loaded machine adds, so the prefill gates pass by
#: design (at 10 it was ~5 ms).
TIME_SCALE = 4.0

#: A small sweep (three prefill lengths, two decode input lengths, two concurrencies). Long
#: prefill lengths keep the simulated work well above the loopback HTTP cost at this time scale.
#: 160-token streams decode for ~0.2 s of real time, so a cohort's streams overlap by design however
#: late a loaded machine starts the last one (64 tokens at time scale 10 gave ~35 ms, and a busy
#: client once started the fourth stream 71 ms after the first).
PREFILL_LENS = ("--prefill-lens", "2048,8192,16384")
DECODE_POINTS = ("--decode-input-lens", "512,2048", "--decode-concurrency", "1,4")
DECODE_TOKENS = ("--decode-tokens", "160")
SMALL_SWEEP = PREFILL_LENS + DECODE_POINTS + DECODE_TOKENS

#: A prefill engine and a decode engine sharing one simulated GPU.
TWO_ENGINES: list[dict[str, Any]] = [
    {"iid": "g0.prefill", "role": "prefill", "shared_device": {"group": "g0"}},
    {"iid": "g0.decode", "role": "decode", "shared_device": {"group": "g0"}},
]


class Kit:
    """What the tests share: the runner, the sweep and fleet shapes, and file helpers."""

    time_scale = TIME_SCALE
    small_sweep = SMALL_SWEEP
    prefill_lens = PREFILL_LENS
    decode_tokens = DECODE_TOKENS
    two_engines = TWO_ENGINES

    @staticmethod
    def run(*args: str | Path, timeout: float = 240.0) -> ProfileRun:
        """Run the command."""
        return run_profile_command(*args, timeout=timeout)

    @staticmethod
    def outputs(fleet: SimFleet) -> tuple[Path, Path]:
        """The store and sidecar a live sweep of ``fleet`` writes."""
        return store_paths(fleet)

    @staticmethod
    def load(path: Path) -> dict[str, Any]:
        """A JSON document from disk."""
        return read_json(path)


@pytest.fixture
def kit() -> Kit:
    """Shared helpers for the narwhal-profile tests."""
    return Kit()


@pytest.fixture
def sim_factory(tmp_path: Path) -> Iterator[Callable[..., SimFleet]]:
    """Start simulated fleets in ``tmp_path`` (stopped at teardown)."""
    started: list[SimFleet] = []

    def start(
        engines: list[dict[str, Any]] | None = None,
        *,
        sim_config: dict[str, Any] | None = None,
        time_scale: float = TIME_SCALE,
        name: str = "sim",
    ) -> SimFleet:
        fleet = start_sim_fleet(
            tmp_path / name,
            engines if engines is not None else TWO_ENGINES,
            sim_config=sim_config,
            time_scale=time_scale,
        )
        started.append(fleet)
        return fleet

    yield start
    for fleet in started:
        fleet.stop()


@pytest.fixture(scope="session")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimFleet]:
    """Two engines on one simulated H200 (default preset), time-scaled."""
    workdir = tmp_path_factory.mktemp("modes-sim")
    engines = [{"iid": iid, "shared_device": {"group": "g0"}} for iid in IIDS]
    with start_sim_fleet(workdir, engines, time_scale=TIME_SCALE, seed=3) as fleet:
        yield fleet


@pytest.fixture(scope="session")
def measured(sim: SimFleet, tmp_path_factory: pytest.TempPathFactory) -> Measured:
    """Live sweeps of both engines in two role mixes, each into its own store."""
    root = tmp_path_factory.mktemp("modes-measured")
    fleet_a = write_fleet(
        root / "a", sim, {"g0.a": "prefill", "g0.b": "decode"}, store="split-1.json"
    )
    fleet_b = write_fleet(
        root / "b", sim, {"g0.a": "decode", "g0.b": "prefill"}, store="split-2.json"
    )
    for fleet in (fleet_a, fleet_b):
        done = run_profile_command("--fleet", fleet, *SWEEP)
        assert done.returncode == 0, done.stderr
    return Measured(fleet_a, root / "a" / "split-1.json", fleet_b, root / "b" / "split-2.json")


def store_paths(fleet: SimFleet) -> tuple[Path, Path]:
    """The store and sidecar a live sweep of ``fleet`` writes."""
    folder = fleet.fleet_path.parent / "profiles"
    return folder / "fleet-profiles.json", folder / "fleet-profiles.samples.json"


def read_json(path: Path) -> dict[str, Any]:
    """A JSON document from disk."""
    doc = orjson.loads(path.read_bytes())
    assert isinstance(doc, dict)
    return doc
