"""The exception tree (pickling, error-body parsing) and completion_body."""

from __future__ import annotations

import json
import pickle

import pytest

from narwhal_engine_client import (
    ContractMismatchError,
    EngineClientError,
    EngineConnectError,
    EngineHTTPError,
    EngineProtocolError,
    EngineStreamError,
    EngineTimeoutError,
    StreamCutError,
    completion_body,
)
from narwhal_engine_client._errors import http_error

ERRORS = [
    EngineClientError("root"),
    EngineHTTPError(400, "bad prompt", "BadRequestError"),
    EngineHTTPError(401, "Unauthorized"),
    EngineHTTPError(403, "Forbidden", None, "http://engine.test/v1/models"),
    EngineStreamError("Internal server error", 500),
    StreamCutError("cut after 3 chunks"),
    EngineTimeoutError("timed out"),
    EngineConnectError("refused"),
    EngineProtocolError("not JSON"),
    ContractMismatchError("block_size", 32, 16),
]


@pytest.mark.parametrize("error", ERRORS, ids=lambda e: type(e).__name__)
def test_errors_pickle_with_attributes(error):
    """Every exception survives pickling with its type, text and attributes."""
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error)
    assert str(copy) == str(error)
    assert vars(copy) == vars(error)
    assert isinstance(copy, EngineClientError)


def test_error_texts():
    """Messages carry the structured facts."""
    assert str(EngineHTTPError(400, "bad", "BadRequestError")) == "HTTP 400: bad (BadRequestError)"
    assert str(EngineHTTPError(401, "Unauthorized")) == "HTTP 401: Unauthorized"
    assert "code 500" in str(EngineStreamError("boom", 500))
    assert str(ContractMismatchError("version", "0.33.0", "0.11.0")) == (
        "engine contract mismatch on 'version': expected '0.33.0', live '0.11.0'"
    )


@pytest.mark.parametrize(
    ("body", "message", "error_type"),
    [
        (
            b'{"error":{"message":"m1","type":"BadRequestError","param":null,"code":400}}',
            "m1",
            "BadRequestError",
        ),
        (
            b'{"object":"error","message":"m2","type":"NotFoundError","param":null,"code":404}',
            "m2",
            "NotFoundError",
        ),
        (b'{"error":"Unauthorized"}', "Unauthorized", None),
        (b'{"detail":"Not Found"}', "Not Found", None),
        (b"upstream exploded", "upstream exploded", None),
        (b"", "Service Unavailable", None),
    ],
)
def test_http_error_body_shapes(body, message, error_type):
    """Every body shape yields the engine's message (else the text, else the reason phrase)."""
    err = http_error(503, body, "Service Unavailable")
    assert (err.status, err.message, err.error_type) == (503, message, error_type)


def test_completion_body_defaults():
    """The body always streams with usage, and min_tokens defaults to max_tokens."""
    doc = json.loads(completion_body(model="llama", prompt=[5, 6, 7], max_tokens=32))
    assert doc == {
        "model": "llama",
        "prompt": [5, 6, 7],
        "max_tokens": 32,
        "min_tokens": 32,
        "temperature": 0.0,
        "ignore_eos": True,
        "add_special_tokens": False,
        "stream": True,
        "stream_options": {"include_usage": True},
    }


def test_completion_body_options_and_extra():
    """Explicit min_tokens, return_token_ids and extra keys are honoured; extra wins."""
    doc = json.loads(
        completion_body(
            model="m",
            prompt="text",
            max_tokens=8,
            min_tokens=0,
            temperature=0.7,
            ignore_eos=False,
            return_token_ids=True,
            extra={
                "seed": 3,
                "stream_options": {"include_usage": True, "continuous_usage_stats": True},
            },
        )
    )
    assert doc["prompt"] == "text"
    assert (doc["min_tokens"], doc["temperature"], doc["ignore_eos"]) == (0, 0.7, False)
    assert doc["return_token_ids"] is True
    assert doc["seed"] == 3
    assert doc["stream_options"]["continuous_usage_stats"] is True
    assert "return_token_ids" not in json.loads(
        completion_body(model="m", prompt=[1], max_tokens=1)
    )
