"""``prepare``: ask the served model for the seed completion's token ids and build the workload."""

from __future__ import annotations

import hashlib
import re
import uuid
from datetime import UTC, datetime
from typing import Any

from narwhal_engine_client import (
    EngineClient,
    EngineClientError,
    EngineHTTPError,
    ModelCard,
    select_model,
)
from narwhal_trial._errors import PrepareError, TrialError, WorkloadError
from narwhal_trial._seed_text import SEED_PROMPT, SEED_PROMPT_NAME
from narwhal_trial._workload import Sampling, SeedPrompt, Workload

SEED_COMPLETION_TOKENS = 32
_PLACEHOLDER = re.compile(r"token_id:(\d+)")


async def live_max_model_len(client: EngineClient, card: ModelCard) -> int:
    """The live context limit from /tokenize, checked against /v1/models when both give one."""
    try:
        tokenized = await client.tokenize("narwhal", model=card.id, add_special_tokens=False)
    except EngineClientError as exc:
        if card.max_model_len is None:
            raise WorkloadError(f"no max_model_len from /v1/models or /tokenize: {exc}") from exc
        return card.max_model_len
    live = tokenized.max_model_len
    if card.max_model_len is not None and card.max_model_len != live:
        raise WorkloadError(
            f"max_model_len disagrees: /v1/models says {card.max_model_len}, /tokenize says {live}"
        )
    return live


async def fitting_model(
    client: EngineClient, wanted: str | None, *, input_tokens: int, output_tokens: int
) -> tuple[ModelCard, int]:
    """The served model (``wanted``, else the only one) and its live ``max_model_len``, which must
    hold input + output tokens."""
    try:
        cards = await client.models()
    except EngineClientError as exc:
        raise TrialError(f"cannot list served models at {client.base_url}: {exc}") from exc
    try:
        card = select_model(cards, wanted, client.base_url)
    except EngineClientError as exc:
        hint = "" if wanted is not None else "; pass --model"
        raise WorkloadError(f"{exc}{hint}") from exc
    limit = await live_max_model_len(client, card)
    if input_tokens + output_tokens > limit:
        raise WorkloadError(
            f"{input_tokens} input + {output_tokens} output tokens exceed the live max_model_len "
            f"{limit}"
        )
    return card, limit


def _seed_body(model: str, extra: dict[str, Any]) -> dict[str, Any]:
    return {
        "model": model,
        "prompt": SEED_PROMPT,
        "max_tokens": SEED_COMPLETION_TOKENS,
        "min_tokens": SEED_COMPLETION_TOKENS,
        "temperature": 0.0,
        "ignore_eos": True,
        "stream": False,
        **extra,
    }


def _first_choice(doc: dict[str, Any]) -> dict[str, Any]:
    choices = doc.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise PrepareError("seed completion answer has no choices")
    choice: dict[str, Any] = choices[0]
    return choice


def _ids_from_token_ids(choice: dict[str, Any]) -> list[int] | None:
    ids = choice.get("token_ids")
    if not isinstance(ids, list) or not ids:
        return None
    if not all(isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in ids):
        raise PrepareError(f"seed completion returned invalid token_ids: {ids[:8]!r}")
    return [int(t) for t in ids]


def _ids_from_logprobs(choice: dict[str, Any]) -> list[int]:
    logprobs = choice.get("logprobs")
    tokens = logprobs.get("tokens") if isinstance(logprobs, dict) else None
    if not isinstance(tokens, list) or not tokens:
        raise PrepareError(
            "the engine returned neither token_ids (return_token_ids) nor logprobs tokens "
            "(return_tokens_as_token_ids)"
        )
    ids: list[int] = []
    for token in tokens:
        match = _PLACEHOLDER.fullmatch(token) if isinstance(token, str) else None
        if match is None:
            raise PrepareError(f"logprobs token {token!r} is not of the form 'token_id:N'")
        ids.append(int(match.group(1)))
    return ids


async def seed_token_ids(client: EngineClient, model: str) -> tuple[list[int], str]:
    """The 32 generated token ids of the seed completion and how they were obtained.

    First with ``return_token_ids`` (vLLM >= 0.10.2); when the engine refuses that field or returns
    no ``token_ids``, again with ``logprobs`` and ``return_tokens_as_token_ids``.
    """
    ids: list[int] | None = None
    try:
        doc = await client.complete(
            _seed_body(model, {"return_token_ids": True}), request_id=_request_id()
        )
        ids = _ids_from_token_ids(_first_choice(doc))
    except EngineHTTPError as exc:
        if exc.status not in (400, 422):
            raise PrepareError(f"seed completion failed: {exc}") from exc
    except EngineClientError as exc:
        raise PrepareError(f"seed completion failed: {exc}") from exc
    source = "return_token_ids"
    if ids is None:
        source = "logprobs"
        body = _seed_body(model, {"logprobs": 1, "return_tokens_as_token_ids": True})
        try:
            doc = await client.complete(body, request_id=_request_id())
        except EngineClientError as exc:
            raise PrepareError(f"seed completion (logprobs fallback) failed: {exc}") from exc
        ids = _ids_from_logprobs(_first_choice(doc))
    if len(ids) != SEED_COMPLETION_TOKENS:
        raise PrepareError(
            f"seed completion returned {len(ids)} token ids, expected {SEED_COMPLETION_TOKENS}"
        )
    return ids, source


async def build_workload(
    client: EngineClient,
    *,
    input_tokens: int,
    output_tokens: int,
    seed: int,
    model: str | None = None,
) -> Workload:
    """Query the served model and its limit, complete the seed prompt, and return the workload."""
    card, limit = await fitting_model(
        client, model, input_tokens=input_tokens, output_tokens=output_tokens
    )
    try:
        version: str | None = await client.version()
    except EngineClientError:
        version = None
    pool, source = await seed_token_ids(client, card.id)
    return Workload(
        model=card.id,
        max_model_len=limit,
        engine_version=version,
        pool=pool,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        seed=seed,
        sampling=Sampling(min_tokens=output_tokens, max_tokens=output_tokens),
        seed_prompt=SeedPrompt(
            name=SEED_PROMPT_NAME,
            sha256=hashlib.sha256(SEED_PROMPT.encode("utf-8")).hexdigest(),
            completion_tokens=SEED_COMPLETION_TOKENS,
            token_ids_source="logprobs" if source == "logprobs" else "return_token_ids",
        ),
        created=datetime.now(UTC).isoformat(timespec="seconds"),
    )


def _request_id() -> str:
    return f"narwhal-trial-prepare-{uuid.uuid4().hex[:16]}"
