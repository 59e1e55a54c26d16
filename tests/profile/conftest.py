"""Fixtures for narwhal-profile tests: run the real command as a subprocess, start sim fleets."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from narwhal_sim.testing import SimFleet, start_sim_fleet

from ._command import ProfileRun, run_profile_command

#: Simulated time runs this much faster than real time in the end-to-end tests. At 4 the shortest
#: TTFT measured (2,048 tokens) is ~13 ms of real time, well above what loopback HTTP on a loaded
#: machine adds, so the prefill gates pass by design (at 10 it was ~5 ms).
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


def store_paths(fleet: SimFleet) -> tuple[Path, Path]:
    """The store and sidecar a live sweep of ``fleet`` writes."""
    folder = fleet.fleet_path.parent / "profiles"
    return folder / "fleet-profiles.json", folder / "fleet-profiles.samples.json"


def read_json(path: Path) -> dict[str, Any]:
    """A JSON document from disk."""
    doc = orjson.loads(path.read_bytes())
    assert isinstance(doc, dict)
    return doc
