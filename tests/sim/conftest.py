"""Fixtures: simulated fleets started as subprocesses on loopback and stopped after the module."""

from __future__ import annotations

import time
from collections.abc import Iterator

import orjson
import pytest

from narwhal_sim.testing import SimFleet, sim_config, start_sim_fleet


@pytest.fixture(scope="module")
def api_fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimFleet]:
    """Two tiny-preset engines: a 0.11-style one and a 0.33-style one with request-id echo."""
    cfg = sim_config(
        {"preset": "tiny", "max_model_len": 4096},
        old={"api_style": "0.11", "version": "0.11.0"},
        new={"api_style": "0.33", "version": "0.33.0", "enable_request_id_headers": True},
    )
    engines = [
        {"iid": "old", "role": "mixed", "model": "m"},
        {"iid": "new", "role": "mixed", "model": "m"},
    ]
    with start_sim_fleet(tmp_path_factory.mktemp("api"), engines, sim_config=cfg) as fleet:
        yield fleet


def journal_by_id(fleet: SimFleet, *wanted: str) -> dict[str, dict[str, object]]:
    """The router journal's entries by request id, once every ``wanted`` id is in it.

    The router writes a request's entry when its handler ends, just after the client has read the
    stream's end, so a journal read at once can miss it (seen with two busy loops beside the
    suite). The entries are waited for, up to 30 s.
    """
    assert fleet.journal_path is not None
    deadline = time.monotonic() + 30.0
    while True:
        lines = fleet.journal_path.read_bytes().splitlines()
        entries = {str(d["request_id"]): d for d in map(orjson.loads, lines)}
        missing = [w for w in wanted if w not in entries]
        if not missing or time.monotonic() > deadline:
            assert not missing, f"the router never journaled {missing}"
            return entries
        time.sleep(0.02)
