"""Bodies of the informational routes: ``/v1/models``, ``/tokenize``, ``/detokenize``, and the
development route ``/server_info``."""

from __future__ import annotations

import platform
import time
import uuid
from typing import Any
from urllib.parse import parse_qs

import orjson

from narwhal_sim import _tokenizer as tok
from narwhal_sim.engine._completions import ApiError, check_model
from narwhal_sim.model._config import EngineSettings


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


#: The sim's scheduler always chunks prefills (``model._scheduler``: decode tokens first, then
#: prefill chunks up to ``max_num_batched_tokens``), as vLLM does by default.
CHUNKED_PREFILL = True


def _config_dict(settings: EngineSettings, prefix_caching: bool) -> dict[str, Any]:
    """A trimmed ``VllmConfig`` as vLLM 0.32 dumps it (``PydanticVllmConfig.dump_python(...,
    mode="json")``): the same nesting and field names for what the simulator knows."""
    s = settings
    return {
        "model_config": {
            "model": s.model_root,
            "runner": "auto",
            "tokenizer": s.model_root,
            "dtype": "torch.bfloat16",
            "seed": 0,
            "max_model_len": s.max_model_len,
            "served_model_name": s.served_model_name,
            "enforce_eager": False,
        },
        "cache_config": {
            "block_size": s.block_size,
            "user_specified_block_size": False,
            "gpu_memory_utilization": s.gpu_memory_utilization,
            "cache_dtype": "auto",
            "enable_prefix_caching": prefix_caching,
            "num_gpu_blocks": s.kv_cache_tokens // s.block_size,
            "num_cpu_blocks": None,
        },
        "parallel_config": {
            "pipeline_parallel_size": 1,
            "tensor_parallel_size": 1,
            "data_parallel_size": 1,
        },
        "scheduler_config": {
            "runner_type": "generate",
            "max_num_batched_tokens": s.max_num_batched_tokens,
            "max_num_scheduled_tokens": None,
            "max_num_seqs": s.max_num_seqs,
            "max_num_active_seqs": None,
            "long_prefill_token_threshold": 0,
            "max_num_queued_reqs": None,
            "max_num_queued_tokens": None,
            "enable_chunked_prefill": CHUNKED_PREFILL,
            "is_multimodal_model": False,
            "policy": "fcfs",
            "scheduler_cls": None,
            "async_scheduling": False,
            "stream_interval": s.stream_interval,
        },
        "speculative_config": None,
        "lora_config": None,
        "kv_transfer_config": None,
    }


def _config_text(settings: EngineSettings, prefix_caching: bool) -> str:
    """``str(VllmConfig)``: what ``config_format=text`` (the default) returns, shortened."""
    s = settings
    return (
        f"model={s.model_root!r}, speculative_config=None, tokenizer={s.model_root!r}, "
        f"dtype=torch.bfloat16, max_seq_len={s.max_model_len}, tensor_parallel_size=1, "
        f"pipeline_parallel_size=1, data_parallel_size=1, kv_cache_dtype=auto, "
        f"served_model_name={s.served_model_name}, enable_prefix_caching={prefix_caching}, "
        f"enable_chunked_prefill={CHUNKED_PREFILL}"
    )


def server_info_reply(settings: EngineSettings, query: str, prefix_caching: bool) -> bytes:
    """vLLM's ``GET /server_info`` (development mode): ``vllm_config`` as a dict
    (``config_format=json``) or its string (``text``, the default), ``vllm_env``, ``system_env``.
    Another ``config_format`` is a 400, as vLLM turns FastAPI's validation errors into one."""
    given = parse_qs(query).get("config_format", ["text"])[-1]
    if given not in ("text", "json"):
        raise ApiError(
            400,
            f"1 validation error: config_format: Input should be 'text' or 'json' (got {given!r})",
            "Bad Request",
            "query.config_format",
        )
    config: Any = (
        _config_dict(settings, prefix_caching)
        if given == "json"
        else _config_text(settings, prefix_caching)
    )
    return orjson.dumps(
        {
            "vllm_config": config,
            "vllm_env": {
                "VLLM_SERVER_DEV_MODE": True,
                "VLLM_HTTP_TIMEOUT_KEEP_ALIVE": settings.keep_alive_s,
            },
            "system_env": {
                "os": "narwhal-sim",
                "python_version": platform.python_version(),
                "torch_version": None,
                "cuda_runtime_version": None,
                "nvidia_gpu_models": None,
            },
        }
    )
