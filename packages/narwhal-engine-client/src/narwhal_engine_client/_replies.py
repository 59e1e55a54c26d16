"""Typed, validated views of the JSON replies of /v1/models, /tokenize, /detokenize, /version."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from narwhal_engine_client._errors import EngineClientError, EngineProtocolError


@dataclass(frozen=True, slots=True)
class ModelCard:
    """One entry of ``GET /v1/models``: served id, ``root`` (the ``--model`` argument),
    ``max_model_len``.

    ``max_model_len`` is None for LoRA cards, which do not carry one.
    """

    id: str
    root: str | None
    max_model_len: int | None


@dataclass(frozen=True, slots=True)
class TokenizeResult:
    """The answer of ``POST /tokenize``: token count, the engine's live ``max_model_len``, the token
    ids.
    """

    count: int
    max_model_len: int
    tokens: list[int]


def select_model(cards: list[ModelCard], model: str | None, where: str) -> ModelCard:
    """The card served as ``model``; without ``model``, the only card listed. EngineClientError
    naming ``where`` (the engine's URL) and what is served otherwise."""
    served = ", ".join(c.id for c in cards) or "none"
    if model is not None:
        for card in cards:
            if card.id == model:
                return card
        raise EngineClientError(f"{where} does not serve model {model!r} (served: {served})")
    if len(cards) == 1:
        return cards[0]
    if not cards:
        raise EngineClientError(f"{where} lists no model in /v1/models")
    raise EngineClientError(f"{where} serves several models ({served}); set `model` to choose one")


def decode_json(content: bytes, what: str) -> Any:
    """Parse a JSON body or raise EngineProtocolError naming the endpoint."""
    try:
        return json.loads(content)
    except ValueError as exc:
        raise EngineProtocolError(f"{what}: body is not JSON: {content[:200]!r}") from exc


def json_object(doc: Any, what: str) -> dict[str, Any]:
    """``doc`` when it is a JSON object, else EngineProtocolError naming ``what``."""
    if not isinstance(doc, dict):
        raise EngineProtocolError(f"{what}: expected a JSON object, got {_short(doc)}")
    return doc


def is_int(value: Any) -> bool:
    """An int that is not a bool."""
    return isinstance(value, int) and not isinstance(value, bool)


def _positive_int(value: Any, what: str) -> int:
    if not is_int(value) or value <= 0:
        raise EngineProtocolError(
            f"{what}: max_model_len must be a positive integer, got {value!r}"
        )
    return int(value)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 200 else text[:197] + "..."


def parse_models(doc: Any) -> list[ModelCard]:
    """Parse ``{"object": "list", "data": [ModelCard...]}``."""
    what = "GET /v1/models"
    data = json_object(doc, what).get("data")
    if not isinstance(data, list):
        raise EngineProtocolError(f"{what}: 'data' must be a list, got {_short(data)}")
    cards: list[ModelCard] = []
    for entry in data:
        card = json_object(entry, what)
        model_id = card.get("id")
        if not isinstance(model_id, str) or not model_id:
            raise EngineProtocolError(
                f"{what}: model 'id' must be a non-empty string, got {_short(model_id)}"
            )
        root = card.get("root")
        if root is not None and not isinstance(root, str):
            raise EngineProtocolError(
                f"{what}: 'root' of {model_id} must be a string, got {_short(root)}"
            )
        limit = card.get("max_model_len")
        if limit is not None:
            limit = _positive_int(limit, f"{what} ({model_id})")
        cards.append(ModelCard(id=model_id, root=root, max_model_len=limit))
    return cards


def parse_tokenize(doc: Any) -> TokenizeResult:
    """Parse ``{"count", "max_model_len", "tokens", ...}``; max_model_len must be positive."""
    what = "POST /tokenize"
    body = json_object(doc, what)
    limit = _positive_int(body.get("max_model_len"), what)
    tokens = body.get("tokens")
    if not isinstance(tokens, list) or not all(is_int(t) for t in tokens):
        raise EngineProtocolError(
            f"{what}: 'tokens' must be a list of integers, got {_short(tokens)}"
        )
    count = body.get("count", len(tokens))
    if not is_int(count) or count < 0:
        raise EngineProtocolError(f"{what}: 'count' must be a non-negative integer, got {count!r}")
    return TokenizeResult(count=int(count), max_model_len=limit, tokens=tokens)


def parse_detokenize(doc: Any) -> str:
    """Parse ``{"prompt": str}``."""
    prompt = json_object(doc, "POST /detokenize").get("prompt")
    if not isinstance(prompt, str):
        raise EngineProtocolError(
            f"POST /detokenize: 'prompt' must be a string, got {_short(prompt)}"
        )
    return prompt


def parse_version(doc: Any) -> str:
    """Parse ``{"version": str}``."""
    version = json_object(doc, "GET /version").get("version")
    if not isinstance(version, str) or not version:
        raise EngineProtocolError(
            f"GET /version: 'version' must be a non-empty string, got {_short(version)}"
        )
    return version
