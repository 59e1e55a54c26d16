"""``/v1/completions``: validation with vLLM's messages, and response bodies by API style."""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from narwhal_sim import _tokenizer as tok
from narwhal_sim.model._config import EngineSettings, version_tuple


class ApiError(Exception):
    """An error vLLM reports as an ErrorResponse (status, message, type, param)."""

    def __init__(
        self, status: int, message: str, err_type: str = "BadRequestError", param: str | None = None
    ):
        super().__init__(message)
        self.status = status
        self.message = message
        self.err_type = err_type
        self.param = param

    def _info(self) -> dict[str, Any]:
        return {
            "message": self.message,
            "type": self.err_type,
            "param": self.param,
            "code": self.status,
        }

    def body(self, shape: str) -> bytes:
        """The error body in the engine's shape (nested ``{"error": {...}}`` or flat)."""
        if shape == "flat":
            return orjson.dumps({"object": "error", **self._info()})
        return orjson.dumps({"error": self._info()})

    def stream_event(self) -> bytes:
        """A mid-stream error event (vLLM builds it with ``json.dumps``: spaced separators)."""
        return b"data: " + json.dumps({"error": self._info()}).encode() + b"\n\n"


def _invalid(loc: tuple[str, ...], msg: str) -> ApiError:
    """The 400 of a request that fails vLLM's (pydantic) schema validation at ``loc``."""
    message = f"1 validation error:\n  {{'loc': {loc!r}, 'msg': '{msg}'}}"
    return ApiError(400, message, "Bad Request", ".".join(loc))


@dataclass(slots=True)
class CompletionParams:
    """A validated completion request."""

    request_id: str  # "cmpl-..."
    prompt_ids: list[int]
    max_tokens: int
    min_tokens: int
    target_tokens: int
    finish_reason: str
    stream: bool
    include_usage: bool
    continuous_usage: bool
    return_token_ids: bool
    logprobs: int | None
    tokens_as_ids: bool
    stream_interval: int
    digest: int
    # vLLM's disaggregated serving (``kv_transfer_params``): this engine prefills for a remote
    # decode engine, or decodes a prompt a remote prefill engine has computed.
    remote_decode: bool = False
    remote_prefill: bool = False
    # sampling parameters (no effect on the simulated tokens; reported in trace spans)
    temperature: float = 1.0
    top_p: float = 1.0


def _bool(body: Mapping[str, Any], key: str, default: bool) -> bool:
    value = body.get(key, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise _invalid(("body", key), "Input should be a valid boolean")
    return value


def _int(body: Mapping[str, Any], key: str, default: int | None) -> int | None:
    value = body.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise _invalid(("body", key), "Input should be a valid integer")
    return value


def _number(body: Mapping[str, Any], key: str, default: float) -> float:
    value = body.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _invalid(("body", key), "Input should be a valid number")
    return float(value)


def _sampling(body: Mapping[str, Any]) -> tuple[float, float]:
    """``temperature`` and ``top_p`` (default 1.0, as vLLM without a generation config), with
    the checks and messages of vLLM's ``SamplingParams``."""
    temperature = _number(body, "temperature", 1.0)
    if not temperature >= 0:
        raise ApiError(
            400, f"temperature must be non-negative, got {temperature}.", param="temperature"
        )
    top_p = _number(body, "top_p", 1.0)
    if not 0 < top_p <= 1:
        raise ApiError(400, f"top_p must be in (0, 1], got {top_p}.", param="top_p")
    return temperature, top_p


def _has_token_ids(version: str) -> bool:
    """Whether a vLLM of ``version`` knows the ``return_token_ids`` request field (0.10.2+)."""
    return version_tuple(version) >= (0, 10, 2)


def check_model(settings: EngineSettings, model: Any) -> None:
    """404 unless ``model`` is empty or the served name."""
    if model in (None, "", settings.served_model_name):
        return
    if settings.api_style == "0.33":
        raise ApiError(
            404,
            f"The model `{model}` does not exist. Valid aliases: {settings.served_model_name}.",
            "NotFoundError",
            "model",
        )
    raise ApiError(404, f"The model `{model}` does not exist.", "NotFoundError")


def _prompt_ids(body: Mapping[str, Any]) -> list[int]:
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], list | str):
        prompt = prompt[0]
    if prompt is None or prompt == "" or prompt == []:
        raise ApiError(400, "Either prompt or prompt_embeds must be provided and non-empty.")
    if isinstance(prompt, str):
        return tok.encode(prompt, add_special_tokens=_bool(body, "add_special_tokens", True))
    if isinstance(prompt, list) and all(
        isinstance(i, int) and not isinstance(i, bool) for i in prompt
    ):
        for i in prompt:
            if i < 0 or i >= tok.VOCAB_SIZE:
                raise ApiError(400, f"Token id {i} is out of vocabulary")
        return list(prompt)
    if isinstance(prompt, list):
        raise ApiError(400, "narwhal-sim serves one prompt per request (got a batch of prompts)")
    raise _invalid(("body", "prompt"), "Input should be a valid list or string")


def _length_checks(settings: EngineSettings, n: int, max_tokens: int) -> int:
    limit = settings.max_model_len
    if settings.max_model_len_policy == "reject":
        if n + max_tokens > limit:
            raise ApiError(
                400,
                f"This model's maximum context length is {limit - max_tokens} tokens. However, "
                f"your request has {n} input tokens. "
                "Please reduce the length of the input messages.",
            )
        return max_tokens
    if max_tokens > limit:
        raise ApiError(
            400,
            f"max_tokens={max_tokens} cannot be greater than max_model_len={limit}. "
            "Please request fewer output tokens.",
            param="max_tokens",
        )
    if n > limit:
        raise ApiError(
            400,
            f"This model's maximum context length is {limit} tokens. However, your prompt "
            f"contains {n} input tokens, which exceeds this limit even without any output tokens. "
            f"Please reduce the length of the input prompt. (parameter=input_tokens, value={n})",
            param="input_tokens",
        )
    clamped = min(max_tokens, limit - n)
    if clamped < 1:
        raise ApiError(400, f"max_tokens must be at least 1, got {clamped}.", param="max_tokens")
    return clamped


def parse_completion(
    settings: EngineSettings, body: Any, header_request_id: str | None
) -> CompletionParams:
    """Validate a completion body the way vLLM does (for the engine's API style)."""
    if not isinstance(body, dict):
        raise _invalid(("body",), "Input should be a valid dictionary")
    check_model(settings, body.get("model"))
    if _int(body, "n", 1) != 1:
        raise ApiError(400, "narwhal-sim supports n=1 only")
    stream = _bool(body, "stream", False)
    options = body.get("stream_options")
    if options is not None and not stream:
        raise ApiError(
            400, "Stream options can only be defined when `stream=True`.", param="stream_options"
        )
    if options is not None and not isinstance(options, dict):
        raise _invalid(("body", "stream_options"), "Input should be an object")
    usage_default = settings.api_style == "0.11"  # include_usage defaulted to True through 0.14
    include_usage = options is not None and _bool(options, "include_usage", usage_default)
    continuous = options is not None and _bool(options, "continuous_usage_stats", False)
    prompt_ids = _prompt_ids(body)
    max_tokens = _int(body, "max_tokens", 16)
    assert max_tokens is not None
    if max_tokens < 1:
        raise ApiError(400, f"max_tokens must be at least 1, got {max_tokens}.", param="max_tokens")
    max_tokens = _length_checks(settings, len(prompt_ids), max_tokens)
    min_tokens = _int(body, "min_tokens", 0) or 0
    if min_tokens > max_tokens:
        raise ApiError(
            400,
            f"min_tokens must be less than or equal to max_tokens={max_tokens}, got {min_tokens}.",
            param="min_tokens",
        )
    logprobs = _int(body, "logprobs", None)
    if logprobs is not None and not 0 <= logprobs <= 20:
        raise ApiError(
            400,
            f"Requested sample logprobs of {logprobs}, which is greater than max allowed: 20",
            param="logprobs",
        )
    interval = settings.stream_interval
    if settings.api_style == "0.33":
        interval = max(interval, _int(body, "stream_interval", 1) or 1)
    digest = tok.prompt_digest(prompt_ids)
    if _bool(body, "ignore_eos", False):
        target = max_tokens
    else:
        target = max(min_tokens, min(max_tokens, tok.natural_length(digest)), 1)
    base = (
        header_request_id
        or body.get("request_id")
        or (
            uuid.uuid4().hex
            if settings.api_style == "0.11"
            else f"{uuid.uuid4().int & (2**64 - 1):016x}"
        )
    )
    # The field arrived in vLLM 0.10.2; older servers ignore it as an unknown key.
    token_ids = _bool(body, "return_token_ids", False) and _has_token_ids(settings.version)
    transfer = body.get("kv_transfer_params")
    if transfer is not None and not isinstance(transfer, dict):
        raise _invalid(("body", "kv_transfer_params"), "Input should be a valid dictionary")
    transfer = transfer or {}
    temperature, top_p = _sampling(body)
    return CompletionParams(
        request_id=f"cmpl-{base}",
        prompt_ids=prompt_ids,
        max_tokens=max_tokens,
        min_tokens=min_tokens,
        target_tokens=target,
        finish_reason="length" if target >= max_tokens else "stop",
        stream=stream,
        include_usage=include_usage,
        continuous_usage=continuous,
        return_token_ids=token_ids,
        logprobs=logprobs,
        tokens_as_ids=_bool(body, "return_tokens_as_token_ids", False),
        stream_interval=interval,
        digest=digest,
        remote_decode=transfer.get("do_remote_decode") is True,
        remote_prefill=transfer.get("do_remote_prefill") is True,
        temperature=temperature,
        top_p=top_p,
    )
