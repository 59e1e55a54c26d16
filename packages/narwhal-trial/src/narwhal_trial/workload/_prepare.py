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
from narwhal_trial.server._frontend import read_frontend_scheduler
from narwhal_trial.workload._file import (
    BLOCK_SAMPLER,
    SAMPLER,
    MaxModelLenSource,
    Sampling,
    SeedPrompt,
    TokenIdsSource,
    TokenizerFile,
    Workload,
)
from narwhal_trial.workload._schedule_options import ScheduleSource
from narwhal_trial.workload._seed_text import SEED_PROMPT, SEED_PROMPT_NAME
from narwhal_trial.workload._tokenizer import LocalTokenizer

SEED_COMPLETION_TOKENS = 32
_PLACEHOLDER = re.compile(r"token_id:(\d+)")
OPERATOR_LIMIT = "pass --max-model-len N, or point the command at an engine that serves the model"
"""What ``run``, ``check`` and ``prepare`` say when the server reports no context limit."""


async def live_limit(
    client: EngineClient, card: ModelCard, given: int | None = None
) -> tuple[int, MaxModelLenSource]:
    """The live context limit and where it was read: ``/tokenize``, checked against
    ``/v1/models`` when both give one; else the frontend's ``dynamo_frontend_model_context_length``
    gauge when it is there and non-zero; ``given`` (``--max-model-len``) is checked against the
    server's and stands in when the server reports none. WorkloadError on a disagreement, or when
    there is no limit at all (the message ends with ``OPERATOR_LIMIT``)."""
    tokenize_error: EngineClientError | None = None
    try:
        live: int | None = (
            await client.tokenize("narwhal", model=card.id, add_special_tokens=False)
        ).max_model_len
    except EngineClientError as exc:
        live, tokenize_error = None, exc
    served = card.max_model_len
    if served is not None and live is not None and served != live:
        raise WorkloadError(
            f"max_model_len disagrees: /v1/models says {served}, /tokenize says {live}"
        )
    source: MaxModelLenSource = "tokenize" if live is not None else "models"
    server = live if live is not None else served
    if server is None:
        published = await read_frontend_scheduler(client, card.id)
        server = None if published is None else published.context_length
        source = "metrics"
    if given is not None and server is not None and given != server:
        raise WorkloadError(
            f"--max-model-len {given} disagrees with the max_model_len {server} that "
            f"{client.base_url} reports ({_SOURCES[source]})"
        )
    if server is not None:
        return server, source
    if given is None:
        raise WorkloadError(
            f"no max_model_len from {client.base_url}/v1/models, /tokenize ({tokenize_error}) or "
            f"its metrics: {OPERATOR_LIMIT}"
        ) from tokenize_error
    return given, "option"


_SOURCES: dict[MaxModelLenSource, str] = {
    "tokenize": "/tokenize",
    "models": "/v1/models",
    "metrics": "dynamo_frontend_model_context_length",
    "option": "--max-model-len",
}


async def live_max_model_len(
    client: EngineClient, card: ModelCard, given: int | None = None
) -> int:
    """``live_limit`` without its source."""
    return (await live_limit(client, card, given))[0]


async def fitting_model(
    client: EngineClient,
    wanted: str | None,
    *,
    input_tokens: int,
    output_tokens: int,
    max_model_len: int | None = None,
    prepared_from: str | None = None,
) -> tuple[ModelCard, int, MaxModelLenSource]:
    """The served model (``wanted``, else the only one), its live ``max_model_len`` and where
    that was read (see ``live_limit``), which must hold input + output tokens. ``prepared_from``
    (the base a workload was prepared from) is named when the model is not served."""
    try:
        cards = await client.models()
    except EngineClientError as exc:
        raise TrialError(f"cannot list served models at {client.base_url}: {exc}") from exc
    try:
        card = select_model(cards, wanted, client.base_url)
    except EngineClientError as exc:
        hint = "; pass --model" if wanted is None else ""
        if prepared_from is not None:
            hint = f"; the workload was prepared from {prepared_from} for {wanted!r}"
        raise WorkloadError(f"{exc}{hint}") from exc
    limit, source = await live_limit(client, card, max_model_len)
    if input_tokens + output_tokens > limit:
        raise WorkloadError(
            f"{input_tokens} input + {output_tokens} output tokens exceed the live max_model_len "
            f"{limit} ({_SOURCES[source]})"
        )
    return card, limit, source


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


def _ids_from_logprobs(choice: dict[str, Any]) -> list[int] | str:
    """The ids of the ``token_id:N`` placeholders, or why there are none."""
    logprobs = choice.get("logprobs")
    tokens = logprobs.get("tokens") if isinstance(logprobs, dict) else None
    if not isinstance(tokens, list) or not tokens:
        return "no logprobs tokens in the answer"
    ids: list[int] = []
    for token in tokens:
        match = _PLACEHOLDER.fullmatch(token) if isinstance(token, str) else None
        if match is None:
            return f"logprobs token {token!r} is not of the form 'token_id:N'"
        ids.append(int(match.group(1)))
    return ids


async def _seed_choice(
    client: EngineClient, model: str, extra: dict[str, Any]
) -> dict[str, Any] | str:
    """The seed completion's first choice, or why there is none when the request was refused as
    invalid (400/422: a field the server does not take). Any other failure is a PrepareError."""
    try:
        doc = await client.complete(_seed_body(model, extra), request_id=_request_id())
    except EngineHTTPError as exc:
        if exc.status in (400, 422):
            return f"refused: {exc}"
        raise PrepareError(f"seed completion failed: {exc}") from exc
    except EngineClientError as exc:
        raise PrepareError(f"seed completion failed: {exc}") from exc
    return _first_choice(doc)


def _exactly_seed_length(ids: list[int], source: str) -> list[int]:
    if len(ids) != SEED_COMPLETION_TOKENS:
        raise PrepareError(
            f"seed completion returned {len(ids)} token ids ({source}), expected "
            f"{SEED_COMPLETION_TOKENS}"
        )
    return ids


async def seed_token_ids(
    client: EngineClient, model: str, tokenizer: LocalTokenizer | None = None
) -> tuple[list[int], TokenIdsSource]:
    """The generated token ids of the seed completion and how they were obtained.

    Tried in turn: ``return_token_ids`` (vLLM >= 0.10.2); ``logprobs`` with
    ``return_tokens_as_token_ids``; then the completion's text re-tokenized, by ``tokenizer``
    (``--tokenizer``) when given, else by the server's ``POST /tokenize`` (a router that passes
    neither field through but has ``/tokenize``). The first two must give exactly the 32
    generated ids. When none works, the PrepareError lists what each gave and says what will do:
    ``--tokenizer``, or an engine URL.
    """
    tried: list[str] = []
    texts: list[str] = []
    answer = await _seed_choice(client, model, {"return_token_ids": True})
    if isinstance(answer, dict):
        texts.append(str(answer.get("text") or ""))
        ids = _ids_from_token_ids(answer)
        if ids is not None:
            return _exactly_seed_length(ids, "return_token_ids"), "return_token_ids"
        answer = "no token_ids in the answer"
    tried.append(f"return_token_ids ({answer})")
    answer = await _seed_choice(client, model, {"logprobs": 1, "return_tokens_as_token_ids": True})
    if isinstance(answer, dict):
        texts.append(str(answer.get("text") or ""))
        found = _ids_from_logprobs(answer)
        if isinstance(found, list):
            return _exactly_seed_length(found, "logprobs"), "logprobs"
        answer = found
    tried.append(f"logprobs with return_tokens_as_token_ids ({answer})")
    text = next((t for t in texts if t), None)
    if tokenizer is not None:
        local = tokenizer.encode(text) if text is not None else []
        if local:
            return local, "tokenizer"
        why = "no completion text" if text is None else "no tokens"
        tried.append(f"--tokenizer {tokenizer.path} on the completion text ({why})")
    elif text is None:
        tried.append("/tokenize of the completion text (no completion text)")
    else:
        try:
            tokens = (await client.tokenize(text, model=model, add_special_tokens=False)).tokens
        except EngineClientError as exc:
            tried.append(f"/tokenize of the completion text ({exc})")
        else:
            if tokens:
                return tokens, "tokenize"
            tried.append("/tokenize of the completion text (no tokens)")
    raise PrepareError(
        f"no token ids for the seed completion from {client.base_url}; tried "
        + "; ".join(tried)
        + f". Pass --tokenizer DIR (the folder of {model}'s tokenizer.json), or prepare against "
        f"an engine that serves {model}, then run the workload against the router"
    )


async def build_workload(
    client: EngineClient,
    *,
    input_tokens: int,
    output_tokens: int,
    seed: int,
    model: str | None = None,
    max_model_len: int | None = None,
    tokenizer: LocalTokenizer | None = None,
    schedule_source: ScheduleSource | None = None,
) -> Workload:
    """Query the served model and its limit (``max_model_len``: ``--max-model-len``), complete
    the seed prompt (re-tokenized by ``tokenizer`` when the server gives no ids), and return the
    workload. With ``schedule_source`` (a trace's window or synthetic draws) the workload holds
    each request's schedule and lengths, fitted to the limit; ``input_tokens`` and
    ``output_tokens`` are then ignored (the longest request's are recorded)."""
    card, limit, limit_source = await fitting_model(
        client,
        model,
        input_tokens=1 if schedule_source is not None else input_tokens,
        output_tokens=1 if schedule_source is not None else output_tokens,
        max_model_len=max_model_len,
    )
    schedule = None
    if schedule_source is not None:
        schedule = schedule_source.schedule(limit, _SOURCES[limit_source])
        k = schedule.longest()
        input_tokens, output_tokens = schedule.input_tokens[k], schedule.output_tokens[k]
    try:
        version: str | None = await client.version()
    except EngineClientError:
        version = None
    pool, source = await seed_token_ids(client, card.id, tokenizer)
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
            token_ids_source=source,
        ),
        created=datetime.now(UTC).isoformat(timespec="seconds"),
        served_by=client.base_url,
        max_model_len_source=limit_source,
        tokenizer=None
        if source != "tokenizer" or tokenizer is None
        else TokenizerFile(path=str(tokenizer.path.absolute()), sha256=tokenizer.sha256),
        sampler=SAMPLER if schedule is None else BLOCK_SAMPLER,
        schedule=schedule,
    )


def _request_id() -> str:
    return f"narwhal-trial-prepare-{uuid.uuid4().hex[:16]}"
