"""What NVIDIA Dynamo 1.6.1's OpenAI frontend says on the wire (observed on its mocker engine):
error bodies, the checks of a completion request, model cards, completion chunks and answers."""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

import orjson

MIMICS = ("dynamo",)
"""Frontends the router can stand in for (``--router-mimic``)."""
UNSUPPORTED = frozenset({"add_special_tokens", "return_token_ids"})
"""vLLM request fields Dynamo refuses (present at all, whatever the value) with a 400."""
DROPPED = ("logprobs", "return_tokens_as_token_ids")
"""Accepted and ignored: the answer has no ``logprobs`` key, token names stay text."""
INVALID_REQUEST = ("InvalidRequest", "request.invalid")
NOT_FOUND = ("NotFound", "request.not_found")
_DESERIALIZE = "Failed to deserialize the JSON body into the target type: "
_STREAM_OPTIONS = (
    "Validation: The 'stream_options' field is only allowed when 'stream' is set to true."
)
_ENGINE_STREAM_OPTIONS = {"include_usage": True, "continuous_usage_stats": True}
_PROMPT_DETAILS = {"audio_tokens": None, "cached_tokens": 0}


def error_body(status: int, message: str) -> bytes:
    """Dynamo's error body: ``{"message": ..., "type": <the status's phrase>, "code": status}``."""
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = "Error"
    return orjson.dumps({"message": message, "type": phrase, "code": status})


def engine_error_body(status: int, body: bytes) -> bytes:
    """An engine's (vLLM-shaped) error answer as Dynamo's frontend words it."""
    message = body.decode("utf-8", "replace")
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        doc = None
    if isinstance(doc, dict):
        inner = doc.get("error")
        found = (inner if isinstance(inner, dict) else doc).get("message")
        if isinstance(found, str):
            message = found
        elif isinstance(inner, str):
            message = inner
    return error_body(status, message)


class Refusal(Exception):
    """A request the frontend answers itself: its status, message and failure class."""

    def __init__(self, status: int, message: str, failure: tuple[str, str]) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.failure = failure

    def body(self) -> bytes:
        """The error body."""
        return error_body(self.status, self.message)


def route_not_found(method: str, path: str) -> Refusal:
    """A route Dynamo does not serve (``/tokenize``, ``/version``...)."""
    return Refusal(404, f"Route not found: {method} {path}", NOT_FOUND)


@dataclass(frozen=True, slots=True)
class CompletionAsk:
    """An accepted completion: what the client asked, and the body the engine gets (always
    streamed, with cumulative usage on every chunk, so the frontend can count tokens itself)."""

    model: str
    stream: bool
    include_usage: bool
    continuous_usage: bool
    engine_doc: dict[str, Any]

    @property
    def request_type(self) -> str:
        """The ``request_type`` label: ``stream`` or ``unary``."""
        return "stream" if self.stream else "unary"


def _type_name(value: Any) -> str:
    if isinstance(value, bool):
        return f"boolean `{str(value).lower()}`"
    if isinstance(value, int | float):
        return f"number `{value}`"
    if isinstance(value, str):
        return f"string {value!r}"
    return "sequence" if isinstance(value, list) else "map"


def _deserialize(detail: str) -> Refusal:
    return Refusal(400, _DESERIALIZE + detail, INVALID_REQUEST)


def check_completion(body: bytes) -> CompletionAsk:
    """Dynamo's checks of a ``/v1/completions`` body, in its order: the JSON and its types,
    ``stream_options`` without ``stream``, unsupported fields (named in the body's order). A
    refused body is a ``Refusal`` (400); the model is the caller's to look up."""
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise _deserialize(str(exc)) from None
    if not isinstance(doc, dict):
        raise _deserialize(
            f"invalid type: {_type_name(doc)}, expected struct NvCreateCompletionRequest"
        )
    model = doc.get("model")
    if model is None:
        raise _deserialize("missing field `model`")
    if not isinstance(model, str):
        raise _deserialize(f"invalid type: {_type_name(model)}, expected a string")
    stream = doc.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise _deserialize(f"invalid type: {_type_name(stream)}, expected a boolean")
    options = doc.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise _deserialize(f"invalid type: {_type_name(options)}, expected struct StreamOptions")
    if options is not None and not stream:
        raise Refusal(400, _STREAM_OPTIONS, INVALID_REQUEST)
    unsupported = [key for key in doc if key in UNSUPPORTED]
    if unsupported:
        names = ", ".join(f"`{key}`" for key in unsupported)
        raise Refusal(400, f"Validation: Unsupported parameter(s): {names}", INVALID_REQUEST)
    options = options or {}
    include_usage = options.get("include_usage") is True
    engine_doc = {k: v for k, v in doc.items() if k not in DROPPED}
    engine_doc.update(stream=True, stream_options=dict(_ENGINE_STREAM_OPTIONS))
    return CompletionAsk(
        model=model,
        stream=bool(stream),
        include_usage=include_usage,
        # observed: continuous_usage_stats without include_usage leaves every usage null
        continuous_usage=include_usage and options.get("continuous_usage_stats") is True,
        engine_doc=engine_doc,
    )


def model_card(model: str, context_window: int) -> dict[str, Any]:
    """One card of ``/v1/models`` (no ``max_model_len``: ``context_window`` instead)."""
    return {
        "id": model,
        "object": "model",
        "created": int(time.time()),
        "owned_by": "nvidia",
        "context_window": context_window,
    }


def model_list(models: Collection[str], context_window: int) -> bytes:
    """``GET /v1/models``."""
    return orjson.dumps({"object": "list", "data": [model_card(m, context_window) for m in models]})


def usage(prompt: int, completion: int) -> dict[str, Any]:
    """A ``usage`` object as Dynamo writes it."""
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": dict(_PROMPT_DETAILS),
    }


@dataclass(frozen=True, slots=True)
class Head:
    """What every chunk of one answer repeats."""

    ident: str
    created: int
    model: str

    def document(
        self, choices: list[dict[str, Any]], usage_doc: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        """A completion document (chunk or whole answer) in Dynamo's key order."""
        return {
            "id": self.ident,
            "choices": choices,
            "created": self.created,
            "model": self.model,
            "system_fingerprint": None,
            "object": "text_completion",
            "usage": usage_doc,
        }

    def chunk(self, choices: list[dict[str, Any]], usage_doc: Mapping[str, Any] | None) -> bytes:
        """One SSE event."""
        return b"data: " + orjson.dumps(self.document(choices, usage_doc)) + b"\n\n"


def split_tokens(text: str, count: int) -> list[tuple[str, int]]:
    """The text of ``count`` tokens as one piece per token when it can be cut so (the simulator's
    tokens are a space and a spelling each), else as one piece holding them all."""
    if count <= 1:
        return [(text, count)] if count == 1 or text else []
    words = text.split(" ")
    if words[0] == "" and len(words) == count + 1 and all(words[1:]):
        return [(" " + w, 1) for w in words[1:]]
    return [(text, count)]
