"""The router as a deployment that is not ours: its own key, engines with keys, missing routes."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from narwhal_engine_client import EngineClient, EngineHTTPError, completion_body
from narwhal_sim.testing import SimFleet, sim_config, start_sim_fleet

ROUTER_KEY = "router-key-7f3a"
ENGINE_KEY = "engine-key-19c2"
BODY = completion_body(model="m", prompt=list(range(300, 340)), max_tokens=4)


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimFleet]:
    """A keyed router guarding every route in front of a keyed engine and a key-less one."""
    engines = [
        {"iid": "locked", "role": "mixed", "model": "m", "api_key_env": "SIM_ENGINE_KEY"},
        {"iid": "open", "role": "mixed", "model": "other"},
    ]
    with start_sim_fleet(
        tmp_path_factory.mktemp("keyed"),
        engines,
        sim_config=sim_config({"preset": "tiny"}),
        router=True,
        router_options=["--router-api-key-env", "SIM_ROUTER_KEY", "--router-auth-scope", "all"],
        env={"SIM_ROUTER_KEY": ROUTER_KEY, "SIM_ENGINE_KEY": ENGINE_KEY},
    ) as fleet:
        yield fleet


async def test_keyed_router_answers_401_like_vllm(keyed: SimFleet) -> None:
    """Without the router's key, or with an engine's key, every route is 401 Unauthorized."""
    assert keyed.router_url is not None
    for key in (None, ENGINE_KEY):
        async with httpx.AsyncClient(base_url=keyed.router_url) as http:
            headers = {"Authorization": f"Bearer {key}"} if key else {}
            for method, path in (("GET", "/v1/models"), ("GET", "/metrics"),
                                 ("POST", "/tokenize"), ("GET", "/health")):  # fmt: skip
                response = await http.request(method, path, headers=headers, json={"prompt": "a"})
                assert (response.status_code, response.json()) == (401, {"error": "Unauthorized"})


async def test_keyed_router_sends_each_engine_its_own_key(keyed: SimFleet) -> None:
    """With the router's key, completions reach the keyed engine (the router sends the engine's
    key, not its own) and the key-less one alike; /metrics and /tokenize answer too."""
    async with EngineClient(keyed.router_url or "", api_key=ROUTER_KEY) as client:
        locked = await client.stream_completion(BODY, request_id="to-locked")
        other = completion_body(model="other", prompt=list(range(300, 340)), max_tokens=4)
        opened = await client.stream_completion(other, request_id="to-open")
        assert (await client.tokenize("a b", model="m")).count == 2
        assert (await client.metrics()).value("narwhal_router_resident_requests") == 0.0
    assert locked.ok and opened.ok, (locked.error, opened.error)
    # the engine itself still wants its own key: the router's is not it
    async with EngineClient(keyed.urls["locked"], api_key=ROUTER_KEY) as client:
        refused = await client.stream_completion(BODY, request_id="wrong-key")
    assert isinstance(refused.error, EngineHTTPError) and refused.error.status == 401


@pytest.fixture(scope="module")
def foreign(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimFleet]:
    """A key-less router that hides /tokenize, max_model_len and /metrics, before a keyed engine."""
    with start_sim_fleet(
        tmp_path_factory.mktemp("foreign"),
        [{"iid": "locked", "role": "mixed", "model": "m", "api_key_env": "SIM_ENGINE_KEY"}],
        sim_config=sim_config({"preset": "tiny"}),
        router=True,
        router_options=[
            f"--router-omit={what}" for what in ("tokenize", "max-model-len", "metrics")
        ],
        env={"SIM_ENGINE_KEY": ENGINE_KEY},
    ) as fleet:
        yield fleet


async def test_router_omissions(foreign: SimFleet) -> None:
    """--router-omit hides what it names (404 for routes, no max_model_len in the model card);
    completions still reach the keyed engine, with the key the router holds for it."""
    async with EngineClient(foreign.router_url or "") as client:
        cards = await client.models()
        assert [c.id for c in cards] == ["m"] and cards[0].max_model_len is None
        for call in (client.tokenize("a b", model="m"), client.metrics()):
            with pytest.raises(EngineHTTPError) as info:
                await call
            assert info.value.status == 404
        assert (await client.stream_completion(BODY, request_id="via-foreign")).ok
    async with EngineClient(foreign.urls["locked"], api_key=ENGINE_KEY) as client:
        assert (await client.models())[0].max_model_len is not None  # the engine still has it


def test_router_options_need_a_router_and_known_values(tmp_path: Path) -> None:
    """Bad router options exit 2 with one line; an unset key variable is named, not guessed."""
    fleet = Path(__file__).resolve().parents[2] / "examples" / "sim-fleet.json"
    cases = [
        (["--router-omit", "tokenize"], "need --router"),
        (["--router", "127.0.0.1:1", "--router-omit", "nothing"], "unknown nothing"),
        (["--router", "127.0.0.1:1", "--router-api-key-env", "SIM_UNSET_KEY_VAR"],
         "SIM_UNSET_KEY_VAR is not set"),
    ]  # fmt: skip
    for extra, message in cases:
        proc = subprocess.run(
            [sys.executable, "-m", "narwhal_sim", "up", "--fleet", str(fleet), *extra],
            capture_output=True, text=True, timeout=60, check=False,
            env={"PATH": "/usr/bin:/bin"},
        )  # fmt: skip
        assert proc.returncode == 2, proc.stderr
        assert message in proc.stderr and proc.stderr.count("\n") == 1
