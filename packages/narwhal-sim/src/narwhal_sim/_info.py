"""Bodies of the informational routes: ``/v1/models``, ``/tokenize``, ``/detokenize``."""

from __future__ import annotations

import time
import uuid
from typing import Any

import orjson

from narwhal_sim import _tokenizer as tok
from narwhal_sim._completions import ApiError, check_model
from narwhal_sim._config import EngineSettings


def model_list(settings: EngineSettings, max_model_len: int | None) -> bytes:
    """A ModelList with the engine's one ModelCard (``max_model_len`` None renders as null)."""
    now = int(time.time())
    card = {
        "id": settings.served_model_name,
        "object": "model",
        "created": now,
        "owned_by": "vllm",
        "root": settings.model_root,
        "parent": None,
        "max_model_len": max_model_len,
        "permission": [
            {
                "id": f"modelperm-{uuid.uuid4().hex}",
                "object": "model_permission",
                "created": now,
                "allow_create_engine": False,
                "allow_sampling": True,
                "allow_logprobs": True,
                "allow_search_indices": False,
                "allow_view": True,
                "allow_fine_tuning": False,
                "organization": "*",
                "group": None,
                "is_blocking": False,
            }
        ],
    }
    return orjson.dumps({"object": "list", "data": [card]})


def tokenize_reply(settings: EngineSettings, body: Any, max_model_len: int | None) -> bytes:
    """A TokenizeResponse (``max_model_len`` None leaves the field out)."""
    if not isinstance(body, dict):
        raise ApiError(400, "1 validation error: body must be an object", "Bad Request", "body")
    check_model(settings, body.get("model"))
    if isinstance(body.get("prompt"), str):
        special = body.get("add_special_tokens", True)
        ids = tok.encode(body["prompt"], add_special_tokens=special is not False)
    elif isinstance(body.get("messages"), list):
        text = " ".join(str(m.get("content", "")) for m in body["messages"] if isinstance(m, dict))
        ids = tok.encode(text, add_special_tokens=body.get("add_special_tokens") is True)
    else:
        raise ApiError(
            400, "1 validation error: 'prompt' must be a string", "Bad Request", "body.prompt"
        )
    out: dict[str, Any] = {"count": len(ids)}
    if max_model_len is not None:
        out["max_model_len"] = max_model_len
    out["tokens"] = ids
    out["token_strs"] = [tok.word(i) for i in ids] if body.get("return_token_strs") else None
    return orjson.dumps(out)


def detokenize_reply(settings: EngineSettings, body: Any) -> bytes:
    """A DetokenizeResponse; ids outside the vocabulary are a 400."""
    if not isinstance(body, dict) or not isinstance(body.get("tokens"), list):
        raise ApiError(
            400, "1 validation error: 'tokens' must be a list", "Bad Request", "body.tokens"
        )
    check_model(settings, body.get("model"))
    ids = body["tokens"]
    for i in ids:
        if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < tok.VOCAB_SIZE:
            raise ApiError(400, f"Token id {i} is out of vocabulary")
    return orjson.dumps({"prompt": tok.decode(ids)})
