"""The simulated engine closes idle connections like vLLM's server, and can make clients lose the
keep-alive race every time (``drop_idle_after_s``)."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from narwhal_sim import SimConfigError
from narwhal_sim.model._config import resolve_engines
from narwhal_sim.testing import SimFleet, fleet_document, sim_config, start_sim_fleet
from narwhal_store import FleetConfig

HEALTH = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimFleet]:
    """``short`` closes connections idle for 0.5 s; ``default`` keeps vLLM's 5 s."""
    engines = [
        {"iid": "short", "role": "mixed", "model": "m"},
        {"iid": "default", "role": "mixed", "model": "m"},
    ]
    cfg = sim_config({"preset": "tiny"}, short={"keep_alive_s": 0.5})
    with start_sim_fleet(tmp_path_factory.mktemp("keepalive"), engines, sim_config=cfg) as sim:
        yield sim


def _connect(url: str) -> socket.socket:
    parts = urlsplit(url)
    assert parts.hostname is not None and parts.port is not None
    return socket.create_connection((parts.hostname, parts.port), timeout=10)


def _read_answer(sock: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        part = sock.recv(65536)
        if not part:
            return data
        data += part
    return data


def test_an_idle_connection_is_closed_after_keep_alive_s(fleet: SimFleet) -> None:
    before = fleet.state("short")["connections"]["idle_closes"]
    with _connect(fleet.urls["short"]) as sock:
        sock.sendall(HEALTH)
        assert _read_answer(sock).startswith(b"HTTP/1.1 200")
        answered = time.monotonic()
        assert sock.recv(1) == b""  # the server's close (EOF), within the 10 s socket timeout
        # not before it was idle for keep_alive_s (0.5 s), with room for a client read late
        assert time.monotonic() - answered >= 0.25
    assert fleet.state("short")["connections"]["idle_closes"] == before + 1
    assert fleet.state("short")["connections"]["keep_alive_s"] == 0.5
    assert fleet.state("default")["connections"]["keep_alive_s"] == 5.0


def test_a_request_on_a_connection_idle_past_the_bound_is_dropped_unanswered(
    fleet: SimFleet,
) -> None:
    fleet.set_faults("default", drop_idle_after_s=1.0)
    try:
        before = fleet.state("default")["connections"]["idle_drops"]
        with _connect(fleet.urls["default"]) as sock:
            sock.sendall(HEALTH)
            assert _read_answer(sock).startswith(b"HTTP/1.1 200")  # used at once: answered
            time.sleep(1.5)
            sock.sendall(HEALTH)
            assert sock.recv(65536) == b""  # closed without one byte of an answer
        assert fleet.state("default")["connections"]["idle_drops"] == before + 1
    finally:
        fleet.set_faults("default", drop_idle_after_s=None)


@pytest.mark.parametrize("bad", [0, -1, "5", True, 7200])
def test_keep_alive_s_must_be_seconds(bad: object) -> None:
    doc = fleet_document([{"iid": "e0", "role": "mixed", "model": "m"}], {"e0": 18001})
    with pytest.raises(SimConfigError, match=r"engines\.e0\.keep_alive_s"):
        resolve_engines(FleetConfig.model_validate(doc), sim_config({}, e0={"keep_alive_s": bad}))


@pytest.mark.parametrize("bad", [-0.5, "1", True])
def test_drop_idle_after_s_must_be_seconds(fleet: SimFleet, bad: object) -> None:
    with pytest.raises(Exception, match="drop_idle_after_s"):
        fleet.set_faults("default", drop_idle_after_s=bad)
