"""Identity and attestation documents (docs/design.md §6), contract checks and canonical hashing."""

from __future__ import annotations

import hashlib
from typing import Any

import httpx
import pytest
import respx

from narwhal_engine_client import (
    ContractMismatchError,
    EngineClient,
    EngineClientError,
    canonical_json,
    evidence_sha256,
    gather_attestation,
    gather_identity,
    sha256_hex,
)

BASE = "http://engine.test"

METRICS = """\
# TYPE process_start_time_seconds gauge
process_start_time_seconds 1764512345.5
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",cache_dtype="auto",enable_prefix_caching="False",engine="0",gpu_memory_utilization="0.9",num_gpu_blocks="27893"} 1.0
"""  # noqa: E501 - real exposition lines are long


def _card(model_id: str, limit: int | None = 16384) -> dict[str, Any]:
    return {"id": model_id, "object": "model", "root": f"org/{model_id}", "max_model_len": limit}


def _engine(mock: respx.MockRouter, models: list[dict[str, Any]], metrics: str = METRICS) -> None:
    mock.get("/v1/models").mock(
        return_value=httpx.Response(200, json={"object": "list", "data": models})
    )
    mock.get("/version").mock(return_value=httpx.Response(200, json={"version": "0.11.0"}))
    mock.get("/metrics").mock(return_value=httpx.Response(200, text=metrics))


IDENTITY = {
    "url": BASE,
    "model": "llama",
    "root": "org/llama",
    "max_model_len": 16384,
    "version": "0.11.0",
    "process_start_time_seconds": 1764512345.5,
}

CONTRACT = {"model": "llama", "max_model_len": 16384, "version": "0.11.0", "prefix_caching": False}


async def test_identity_of_single_model_engine():
    """gather_identity returns exactly the six live facts."""
    with respx.mock(base_url=BASE) as mock:
        _engine(mock, [_card("llama")])
        async with EngineClient(BASE) as client:
            assert await gather_identity(client) == IDENTITY


async def test_identity_needs_model_when_several_served():
    """With several served models, gather_identity asks for `model`, and uses it when given."""
    with respx.mock(base_url=BASE) as mock:
        _engine(mock, [_card("llama"), _card("other", 8192)])
        async with EngineClient(BASE) as client:
            with pytest.raises(EngineClientError, match="model"):
                await gather_identity(client)
            doc = await gather_identity(client, model="other")
            with pytest.raises(EngineClientError, match="missing"):
                await gather_identity(client, model="missing")
    assert (doc["model"], doc["max_model_len"]) == ("other", 8192)


async def test_identity_changes_with_restart():
    """A new process start time gives a different generation hash."""
    with respx.mock(base_url=BASE) as mock:
        _engine(mock, [_card("llama")])
        async with EngineClient(BASE) as client:
            before = evidence_sha256(await gather_identity(client))
        _engine(mock, [_card("llama")], METRICS.replace("1764512345.5", "1764519999.0"))
        async with EngineClient(BASE) as client:
            after = evidence_sha256(await gather_identity(client))
    assert before != after


async def test_attestation_holds():
    """A matching contract gives identity + cache_config labels + the contract echo."""
    contract = {**CONTRACT, "block_size": 16, "cache_dtype": "auto", "gpu_memory_utilization": 0.9}
    with respx.mock(base_url=BASE) as mock:
        _engine(mock, [_card("llama")])
        async with EngineClient(BASE) as client:
            doc = await gather_attestation(client, contract)
    assert {k: doc[k] for k in IDENTITY} == IDENTITY
    assert doc["cache_config"]["num_gpu_blocks"] == "27893"
    assert doc["contract"] == contract
    assert set(doc) == {*IDENTITY, "cache_config", "contract"}


async def test_attestation_contract_model_picks_among_several():
    """With several served models and no `model`, the contract's model chooses the card."""
    with respx.mock(base_url=BASE) as mock:
        _engine(mock, [_card("other", 8192), _card("llama")])
        async with EngineClient(BASE) as client:
            doc = await gather_attestation(client, CONTRACT)
    assert doc["model"] == "llama"


@pytest.mark.parametrize(
    ("key", "expected", "live"),
    [
        ("model", "mistral", "llama"),
        ("max_model_len", 8192, 16384),
        ("max_model_len", "16384", 16384),
        ("version", "0.33.0", "0.11.0"),
        ("prefix_caching", True, False),
        ("block_size", 32, 16),
        ("cache_dtype", "fp8", "auto"),
        ("kv_sharing_fast_prefill", False, None),
    ],
)
async def test_attestation_mismatch(key, expected, live):
    """A contract key that disagrees with the live fact raises ContractMismatchError."""
    contract = {**CONTRACT, key: expected}
    with respx.mock(base_url=BASE) as mock:
        _engine(mock, [_card("llama")])
        async with EngineClient(BASE) as client:
            with pytest.raises(ContractMismatchError) as info:
                await gather_attestation(client, contract)
    err = info.value
    assert (err.key, err.expected, err.live) == (key, expected, live)
    assert key in str(err) and repr(expected) in str(err)


async def test_attestation_without_cache_config_fails_prefix_check():
    """An engine whose page has no cache_config_info cannot attest prefix_caching (live None)."""
    with respx.mock(base_url=BASE) as mock:
        _engine(mock, [_card("llama")], "process_start_time_seconds 1.0\n")
        async with EngineClient(BASE) as client:
            with pytest.raises(ContractMismatchError) as info:
                await gather_attestation(client, CONTRACT)
    assert (info.value.key, info.value.live) == ("prefix_caching", None)


def test_canonical_json_and_hash():
    """canonical_json is sorted, compact, ASCII; evidence_sha256 is sha256 of it."""
    doc = {"b": 1, "a": [1.5, None, True], "é": "ü"}
    data = canonical_json(doc)
    assert data == b'{"a":[1.5,null,true],"b":1,"\\u00e9":"\\u00fc"}'
    assert sha256_hex(data) == hashlib.sha256(data).hexdigest()
    assert evidence_sha256(doc) == sha256_hex(data)
    assert evidence_sha256(dict(reversed(list(doc.items())))) == evidence_sha256(doc)
    with pytest.raises(ValueError):
        canonical_json({"x": float("nan")})
