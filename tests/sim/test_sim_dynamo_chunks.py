"""--router-mimic dynamo streams as Dynamo 1.6.1's frontend: one chunk per token, "usage":null
(or cumulative usage with continuous_usage_stats), the last token without finish_reason, an
empty finish chunk, the usage chunk, [DONE]; unary answers without logprobs or token ids."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from narwhal_sim.testing import SimFleet

from ._dynamo_kit import MODEL, completion, dynamo_fleet, post, sse_data

TOKENS = 5
PROMPT = 8
DETAILS = {"audio_tokens": None, "cached_tokens": 0}
CHUNK_KEYS = ["id", "choices", "created", "model", "system_fingerprint", "object", "usage"]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimFleet]:
    """An engine that makes an output only every 3 tokens (vLLM's --stream-interval 3), so
    the frontend has to cut engine chunks into tokens itself."""
    with dynamo_fleet(
        tmp_path_factory.mktemp("dynamo-chunks"), engine={"stream_interval": 3}
    ) as running:
        yield running


def _usage(completion_tokens: int) -> dict[str, Any]:
    return {
        "prompt_tokens": PROMPT,
        "completion_tokens": completion_tokens,
        "total_tokens": PROMPT + completion_tokens,
        "prompt_tokens_details": DETAILS,
    }


def _stream(fleet: SimFleet, options: dict[str, Any] | None, **fields: Any) -> list[Any]:
    body = completion(max_tokens=TOKENS, stream=True, **fields)
    if options is not None:
        body["stream_options"] = options
    answer = post(f"{fleet.router_url}/v1/completions", body, **{"x-request-id": "chunks-1"})
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "text/event-stream"
    assert answer.headers["x-request-id"] == "chunks-1"
    return sse_data(answer.text)


def _check_tokens(events: list[Any], usages: list[Any]) -> None:
    """TOKENS chunks of one token each, then the finish chunk; ``usages`` per chunk."""
    ids = {e["id"] for e in events if e != "[DONE]"}
    assert len(ids) == 1 and ids.pop().startswith("cmpl-")
    for k, event in enumerate(events[: TOKENS + 1]):
        assert list(event) == CHUNK_KEYS
        assert (event["model"], event["object"]) == (MODEL, "text_completion")
        assert event["system_fingerprint"] is None and event["usage"] == usages[k]
    texts = [e["choices"] for e in events[:TOKENS]]
    for choices in texts:
        assert len(choices) == 1 and list(choices[0]) == ["text", "index"]
        assert choices[0]["text"].startswith(" ") and len(choices[0]["text"]) == 7
    assert events[TOKENS]["choices"] == [{"text": "", "index": 0, "finish_reason": "length"}]


def test_include_usage_stream(fleet: SimFleet) -> None:
    """usage null on every content chunk, the empty finish chunk, then the usage chunk."""
    events = _stream(fleet, {"include_usage": True}, logprobs=1)
    assert len(events) == TOKENS + 3
    _check_tokens(events, [None] * (TOKENS + 1))
    assert events[TOKENS + 1]["choices"] == [] and events[TOKENS + 1]["usage"] == _usage(TOKENS)
    assert events[-1] == "[DONE]"
    assert "token_ids" not in str(events) and "logprobs" not in str(events)


def test_continuous_usage_stream(fleet: SimFleet) -> None:
    """Cumulative usage on every chunk: 1..N, N on the finish chunk and on the usage chunk."""
    events = _stream(fleet, {"include_usage": True, "continuous_usage_stats": True})
    assert len(events) == TOKENS + 3
    _check_tokens(events, [_usage(k + 1) for k in range(TOKENS)] + [_usage(TOKENS)])
    assert events[TOKENS + 1]["usage"] == _usage(TOKENS) and events[-1] == "[DONE]"


@pytest.mark.parametrize("options", [None, {"continuous_usage_stats": True}])
def test_stream_without_include_usage_has_no_usage_chunk(
    fleet: SimFleet, options: dict[str, Any] | None
) -> None:
    """Without include_usage (continuous_usage_stats alone included): usage null everywhere,
    no usage chunk."""
    events = _stream(fleet, options)
    assert len(events) == TOKENS + 2 and events[-1] == "[DONE]"
    _check_tokens(events, [None] * (TOKENS + 1))


def test_unary_answer_has_no_logprobs_and_ignores_token_id_names(fleet: SimFleet) -> None:
    """A non-streaming answer: Dynamo's keys, no logprobs even when asked, text not token ids."""
    body = completion(max_tokens=TOKENS, logprobs=2, return_tokens_as_token_ids=True)
    answer = post(f"{fleet.router_url}/v1/completions", body, **{"x-request-id": "unary-1"})
    assert answer.status_code == 200 and answer.headers["x-request-id"] == "unary-1"
    doc = answer.json()
    assert list(doc) == CHUNK_KEYS and doc["usage"] == _usage(TOKENS)
    (choice,) = doc["choices"]
    assert list(choice) == ["text", "index", "finish_reason"]
    assert choice["finish_reason"] == "length"
    words = choice["text"].split(" ")
    assert words[0] == "" and len(words) == TOKENS + 1 and "token_id" not in choice["text"]


def test_streamed_text_is_the_unary_text(fleet: SimFleet) -> None:
    """The tokens streamed one by one are the engine's text, as the unary answer gives it."""
    events = _stream(fleet, None)
    streamed = "".join(e["choices"][0]["text"] for e in events[:TOKENS])
    unary = post(f"{fleet.router_url}/v1/completions", completion(max_tokens=TOKENS)).json()
    assert streamed == unary["choices"][0]["text"]
