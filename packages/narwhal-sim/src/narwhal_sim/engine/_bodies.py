"""Response documents: non-streaming completion bodies, logprobs objects, the 0.33 fingerprint."""

from __future__ import annotations

from typing import Any

import orjson

from narwhal_sim import _tokenizer as tok
from narwhal_sim.engine._completions import CompletionParams
from narwhal_sim.model._config import EngineSettings


def fingerprint(settings: EngineSettings) -> str:
    """0.33's ``system_fingerprint`` (``vllm-<version>-<hash8>``)."""
    h = tok.prompt_digest([ord(c) for c in settings.iid + settings.version]) & 0xFFFFFFFF
    return f"vllm-{settings.version}-{h:08x}"


def logprobs_obj(
    ids: list[int], texts: list[str], offset: int, top: int, as_ids: bool
) -> dict[str, Any]:
    """A CompletionLogProbs object for ``ids`` whose text starts at ``offset``."""

    def name(i: int) -> str:
        return f"token_id:{i}" if as_ids else tok.token_text(i)

    offsets, pos = [], offset
    for t in texts:
        offsets.append(pos)
        pos += len(t)
    tops = []
    for i in ids:
        entry = {name(i): -0.0125}
        alt = i
        while len(entry) < max(1, top):
            alt = tok.FIRST_ORDINARY + (alt + 7919 - tok.FIRST_ORDINARY) % (
                tok.VOCAB_SIZE - tok.FIRST_ORDINARY
            )
            entry[name(alt)] = -4.0 - len(entry)
        tops.append(entry)
    return {
        "text_offset": offsets,
        "token_logprobs": [-0.0125] * len(ids),
        "tokens": [name(i) for i in ids],
        "top_logprobs": tops,
    }


def kv_transfer_reply(settings: EngineSettings, p: CompletionParams) -> dict[str, Any] | None:
    """What a prefill engine hands to the decode engine (vLLM's NixlConnector fields)."""
    if not p.remote_decode:
        return None
    blocks = -(-len(p.prompt_ids) // settings.block_size)
    return {
        "do_remote_prefill": True,
        "do_remote_decode": False,
        "remote_engine_id": settings.iid,
        "remote_block_ids": list(range(blocks)),
        "remote_host": settings.host,
        "remote_port": settings.port,
        "tp_size": 1,
    }


def completion_body(settings: EngineSettings, p: CompletionParams, created: int) -> bytes:
    """The non-streaming CompletionResponse of a finished request (all ``target_tokens`` out)."""
    generated = p.target_tokens
    ids = [tok.generated_id(p.digest, k) for k in range(generated)]
    texts = [tok.token_text(i) for i in ids]
    choice: dict[str, Any] = {
        "index": 0,
        "text": "".join(texts),
        "logprobs": logprobs_obj(ids, texts, 0, p.logprobs, p.tokens_as_ids)
        if p.logprobs is not None
        else None,
        "finish_reason": p.finish_reason,
        "stop_reason": None,
        "token_ids": ids if p.return_token_ids else None,
        "prompt_logprobs": None,
        "prompt_token_ids": p.prompt_ids if p.return_token_ids else None,
    }
    usage: dict[str, Any] = {
        "prompt_tokens": len(p.prompt_ids),
        "total_tokens": len(p.prompt_ids) + generated,
        "completion_tokens": generated,
        "prompt_tokens_details": None,
    }
    doc: dict[str, Any] = {
        "id": p.request_id,
        "object": "text_completion",
        "created": created,
        "model": settings.served_model_name,
        "choices": [choice],
        "service_tier": None,
    }
    if settings.api_style == "0.33":
        choice.update({"routed_experts": None, "weight_versions": None})
        usage["completion_tokens_details"] = None
        doc.update(
            {
                "system_fingerprint": fingerprint(settings),
                "usage": usage,
                "kv_transfer_params": kv_transfer_reply(settings, p),
                "ec_transfer_params": None,
                "metrics": None,
            }
        )
    else:
        doc.update(
            {
                "system_fingerprint": None,
                "usage": usage,
                "kv_transfer_params": kv_transfer_reply(settings, p),
            }
        )
    return orjson.dumps(doc)
