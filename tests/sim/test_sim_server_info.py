"""``dev_mode``: an engine that serves vLLM's development route ``GET /server_info`` as vLLM 0.32
does with ``VLLM_SERVER_DEV_MODE=1``; without it, a 404 as vLLM."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from narwhal_engine_client import EngineClient, SchedulerConfig
from narwhal_sim import SimConfigError
from narwhal_sim.model._config import resolve_engines
from narwhal_sim.testing import SimFleet, fleet_document, sim_config, start_sim_fleet
from narwhal_store import FleetConfig


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimFleet]:
    """``dev`` runs in development mode with a 2,048-token budget and 8 sequences; ``plain`` not."""
    engines = [
        {"iid": "dev", "role": "mixed", "model": "m"},
        {"iid": "plain", "role": "mixed", "model": "m"},
    ]
    cfg = sim_config(
        {"preset": "tiny"},
        dev={"dev_mode": True, "max_num_batched_tokens": 2048, "max_num_seqs": 8},
    )
    with start_sim_fleet(tmp_path_factory.mktemp("dev-mode"), engines, sim_config=cfg) as sim:
        yield sim


def test_json_format_nests_the_configs_as_vllm(fleet: SimFleet) -> None:
    """config_format=json: vllm_config holds scheduler_config and cache_config dicts."""
    got = httpx.get(fleet.urls["dev"] + "/server_info", params={"config_format": "json"})
    assert got.status_code == 200
    doc = got.json()
    assert set(doc) == {"vllm_config", "vllm_env", "system_env"}
    scheduler = doc["vllm_config"]["scheduler_config"]
    assert scheduler["max_num_batched_tokens"] == 2048
    assert scheduler["max_num_seqs"] == 8
    assert scheduler["enable_chunked_prefill"] is True
    assert doc["vllm_config"]["cache_config"]["block_size"] == 16
    assert doc["vllm_config"]["model_config"]["served_model_name"] == "m"
    assert doc["vllm_env"]["VLLM_SERVER_DEV_MODE"] is True


def test_text_format_is_the_default(fleet: SimFleet) -> None:
    """Without config_format (or with text), vllm_config is the config's string."""
    for params in ({}, {"config_format": "text"}):
        doc = httpx.get(fleet.urls["dev"] + "/server_info", params=params).json()
        assert isinstance(doc["vllm_config"], str)
        assert "max_seq_len=" in doc["vllm_config"]


def test_another_format_is_a_400(fleet: SimFleet) -> None:
    """config_format must be text or json (vLLM turns the validation error into a 400)."""
    got = httpx.get(fleet.urls["dev"] + "/server_info", params={"config_format": "yaml"})
    assert got.status_code == 400
    assert got.json()["error"]["param"] == "query.config_format"


def test_without_dev_mode_the_route_is_absent(fleet: SimFleet) -> None:
    """The default engine answers 404 for every method, as vLLM without dev mode."""
    for method in ("GET", "POST"):
        got = httpx.request(method, fleet.urls["plain"] + "/server_info?config_format=json")
        assert (got.status_code, got.json()) == (404, {"detail": "Not Found"})


async def test_the_engine_client_reads_it(fleet: SimFleet) -> None:
    """EngineClient.scheduler_config: the settings of the dev engine, None for the other."""
    async with EngineClient(fleet.urls["dev"]) as client:
        assert await client.scheduler_config() == SchedulerConfig(2048, 8, True)
    async with EngineClient(fleet.urls["plain"]) as client:
        assert await client.scheduler_config() is None


@pytest.mark.parametrize("bad", ["yes", 1, None])
def test_dev_mode_must_be_a_boolean(bad: object) -> None:
    """Anything but true or false is refused naming the key and the value."""
    doc = fleet_document([{"iid": "e0", "role": "mixed", "model": "m"}], {"e0": 18001})
    with pytest.raises(SimConfigError, match=r"engines\.e0\.dev_mode: expected true or false"):
        resolve_engines(FleetConfig.model_validate(doc), sim_config({}, e0={"dev_mode": bad}))
