"""Evidence documents (docs/design.md §6): live process identity and verified engine attestation."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from narwhal_engine_client._canonical import canonical_json, sha256_hex
from narwhal_engine_client._client import EngineClient
from narwhal_engine_client._errors import ContractMismatchError
from narwhal_engine_client._metrics import MetricsSnapshot
from narwhal_engine_client._replies import is_int, select_model


def evidence_sha256(doc: Mapping[str, Any]) -> str:
    """SHA-256 hex of the canonical JSON of ``doc``; for an identity document, the generation."""
    return sha256_hex(canonical_json(doc))


async def _facts(
    client: EngineClient, model: str | None, fallback: str | None
) -> tuple[dict[str, Any], MetricsSnapshot]:
    cards = await client.models()
    if model is None and len(cards) > 1 and any(c.id == fallback for c in cards):
        model = fallback
    card = select_model(cards, model, client.base_url)
    version = await client.version()
    snapshot = await client.metrics()
    identity = {
        "url": client.base_url,
        "model": card.id,
        "root": card.root,
        "max_model_len": card.max_model_len,
        "version": version,
        "process_start_time_seconds": snapshot.process_start_time_seconds,
    }
    return identity, snapshot


async def gather_identity(client: EngineClient, *, model: str | None = None) -> dict[str, Any]:
    """The live process identity: url, model, root, max_model_len, version, process start time.

    ``model`` picks a served model; without it the engine must list exactly one.
    """
    identity, _ = await _facts(client, model, None)
    return identity


async def gather_attestation(
    client: EngineClient, contract: Mapping[str, Any], *, model: str | None = None
) -> dict[str, Any]:
    """The identity facts plus ``cache_config`` labels and the ``contract`` echo, after checking the
    contract.

    Each contract key is compared with the live fact (keys in sorted order; the first mismatch
    raises ContractMismatchError(key, expected, live)): ``model`` (served id), ``root``,
    ``max_model_len`` (int), ``version`` (string), ``prefix_caching`` (bool against
    ``enable_prefix_caching``), ``block_size`` (int against the label); any other key against the
    ``vllm:cache_config_info`` label of the same name, as ``str(expected)`` (vLLM writes each label
    as ``str(value)``). A fact the engine does not show is live None. With several served models and
    no ``model``, the contract's ``model`` picks one when it is served.
    """
    fallback = contract.get("model")
    identity, snapshot = await _facts(
        client, model, fallback if isinstance(fallback, str) else None
    )
    cache = snapshot.cache_config()
    for key in sorted(contract):
        expected = contract[key]
        live = _live_value(key, expected, identity, cache)
        if not _matches(key, expected, live):
            raise ContractMismatchError(key, expected, live)
    return {**identity, "cache_config": cache, "contract": dict(contract)}


def _live_value(
    key: str, expected: Any, identity: Mapping[str, Any], cache: Mapping[str, str] | None
) -> Any:
    if key in ("model", "root", "max_model_len", "version"):
        return identity[key]
    labels = cache or {}
    if key == "prefix_caching":
        raw = labels.get("enable_prefix_caching")
        return {"True": True, "False": False}.get(raw, raw) if raw is not None else None
    if key == "block_size":
        raw = labels.get("block_size")
        return int(raw) if raw is not None and raw.strip().isdigit() else raw
    return labels.get(key)


def _matches(key: str, expected: Any, live: Any) -> bool:
    if live is None:
        return False
    if key in ("max_model_len", "block_size"):
        return is_int(expected) and is_int(live) and bool(expected == live)
    if key == "prefix_caching":
        return isinstance(expected, bool) and isinstance(live, bool) and expected is live
    if key in ("model", "root", "version"):
        return isinstance(expected, str) and isinstance(live, str) and expected == live
    return isinstance(live, str) and str(expected) == live
