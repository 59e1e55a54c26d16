"""Request bodies for ``POST /v1/completions``, encoded once before any clock starts."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from narwhal_engine_client._counting import TokenCounting


def completion_body(
    *,
    model: str,
    prompt: Sequence[int] | str,
    max_tokens: int,
    min_tokens: int | None = None,
    temperature: float = 0.0,
    ignore_eos: bool = True,
    add_special_tokens: bool | None = False,
    return_token_ids: bool = False,
    token_counting: TokenCounting | None = None,
    extra: Mapping[str, Any] | None = None,
) -> bytes:
    """Build the JSON body of one streaming completion, as bytes.

    ``stream: true`` and ``stream_options: {"include_usage": true}`` are always set explicitly
    (the server default flipped between vLLM 0.14 and 0.20). ``min_tokens=None`` means
    ``min_tokens = max_tokens``, so that with ``ignore_eos`` every request produces exactly
    ``max_tokens`` tokens. ``return_token_ids`` (vLLM 0.10.2+) is sent only when true, so older
    engines do not see an unknown field. ``token_counting`` asks for exact per-chunk token counts
    (see :func:`token_counting`): ``return_token_ids``, ``stream_options.continuous_usage_stats``,
    or both. ``add_special_tokens=None`` leaves the field out (for a server that refuses it, such
    as NVIDIA Dynamo's frontend; with a token-id prompt it has no effect). ``extra`` is merged
    last and may override any key. A token-id prompt is sent as a list of ints, used by the
    engine as given.
    """
    if isinstance(prompt, str):
        prompt_value: str | list[int] = prompt
    else:
        prompt_value = [int(t) for t in prompt]
    body: dict[str, Any] = {
        "model": model,
        "prompt": prompt_value,
        "max_tokens": max_tokens,
        "min_tokens": max_tokens if min_tokens is None else min_tokens,
        "temperature": temperature,
        "ignore_eos": ignore_eos,
        "add_special_tokens": add_special_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if add_special_tokens is None:
        del body["add_special_tokens"]
    if return_token_ids or token_counting in ("token_ids", "both"):
        body["return_token_ids"] = True
    if token_counting in ("usage", "both"):
        body["stream_options"] = {"include_usage": True, "continuous_usage_stats": True}
    if extra:
        body.update(extra)
    return json.dumps(body, separators=(",", ":"), allow_nan=False).encode("utf-8")
