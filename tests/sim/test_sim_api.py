"""The vLLM HTTP surface of a simulated engine (tiny preset): fields, framing, errors, counts."""

from __future__ import annotations

from pathlib import Path

import httpx
import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from narwhal_engine_client import EngineClient, EngineHTTPError, completion_body
from narwhal_sim import encode
from narwhal_sim.testing import SimFleet, sim_config, start_sim_fleet

PROMPT = list(range(1000, 1300))


def _events(text: str) -> list[str]:
    assert text.endswith("\n\n")
    return [e.removeprefix("data: ") for e in text.split("\n\n") if e]


async def _post(url: str, body: dict[str, object], **headers: str) -> httpx.Response:
    async with httpx.AsyncClient(timeout=30) as c:
        return await c.post(url + "/v1/completions", json=body, headers=headers)


async def test_exact_token_counts(api_fleet: SimFleet) -> None:
    """usage and token_ids give exactly the prompt length and max_tokens."""
    for iid in ("old", "new"):
        async with EngineClient(api_fleet.urls[iid]) as client:
            body = completion_body(model="m", prompt=PROMPT, max_tokens=37, return_token_ids=True)
            rec = await client.stream_completion(
                body, request_id=f"count-{iid}", keep_token_ids=True
            )
        assert rec.error is None and rec.ok
        assert rec.prompt_tokens == len(PROMPT)
        assert rec.completion_tokens == 37
        assert rec.token_ids is not None and len(rec.token_ids) == 37
        assert sum(rec.chunk_tokens) == 37
        assert rec.finish_reason == "length"


async def test_tokenize_detokenize_round_trip(api_fleet: SimFleet) -> None:
    """/tokenize counts are exact and stable; /detokenize text tokenizes back to the same ids."""
    async with EngineClient(api_fleet.urls["new"]) as client:
        first = await client.tokenize("the quick brown fox", model="m")
        again = await client.tokenize("the quick brown fox", model="m")
        special = await client.tokenize("the quick brown fox", model="m", add_special_tokens=True)
        assert first.count == 4 and first.tokens == again.tokens
        assert special.count == 5 and special.tokens[1:] == first.tokens
        assert first.max_model_len == 4096
        ids = [400, 401, 31999, 12345]
        text = await client.detokenize(ids, model="m")
    assert encode(text) == ids


async def test_stream_framing_by_style(api_fleet: SimFleet) -> None:
    """0.11 chunks carry usage:null and the prompt_token_ids bug; 0.33 ones weight_versions."""
    base = {
        "model": "m",
        "prompt": PROMPT[:10],
        "max_tokens": 3,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {},
    }
    old = _events((await _post(api_fleet.urls["old"], base, **{"x-request-id": "rid-1"})).text)
    new = _events((await _post(api_fleet.urls["new"], base, **{"x-request-id": "rid-2"})).text)
    assert old[-1] == new[-1] == "[DONE]"
    first_old = orjson.loads(old[0])
    assert first_old["id"] == "cmpl-rid-1" and first_old["usage"] is None
    assert first_old["choices"][0]["prompt_token_ids"] == PROMPT[:10]  # the 0.11.0 bug
    assert orjson.loads(old[-2])["usage"] == {
        "prompt_tokens": 10,
        "total_tokens": 13,
        "completion_tokens": 3,
    }
    assert len(old) == 5  # 3 content chunks, usage (0.11 default include_usage=True), [DONE]
    first_new = orjson.loads(new[0])
    assert first_new["choices"][0]["prompt_token_ids"] is None
    assert "weight_versions" in first_new["choices"][0] and "usage" not in first_new
    assert len(new) == 4  # no usage chunk: include_usage defaults to False in 0.33
    assert orjson.loads(new[-2])["system_fingerprint"].startswith("vllm-0.33.0-")


async def test_request_id_echo_and_non_streaming(api_fleet: SimFleet) -> None:
    """The 0.33 engine echoes X-Request-Id; a non-streaming body has usage and the cmpl- id."""
    resp = await _post(
        api_fleet.urls["new"],
        {"model": "m", "prompt": "hello there", "max_tokens": 4, "ignore_eos": True},
        **{"x-request-id": "abc"},
    )
    assert resp.status_code == 200 and resp.headers["x-request-id"] == "abc"
    doc = resp.json()
    assert doc["id"] == "cmpl-abc" and doc["object"] == "text_completion"
    assert doc["usage"]["completion_tokens"] == 4 and doc["usage"]["prompt_tokens"] == 3  # BOS + 2
    old = await _post(
        api_fleet.urls["old"], {"prompt": "hello", "max_tokens": 2}, **{"x-request-id": "x"}
    )
    assert "x-request-id" not in old.headers


async def test_eos_and_min_tokens(api_fleet: SimFleet) -> None:
    """Without ignore_eos a request stops at its fixed EOS point, never before min_tokens."""
    body = {"model": "m", "prompt": PROMPT, "max_tokens": 1000}
    a = (await _post(api_fleet.urls["new"], body)).json()
    b = (await _post(api_fleet.urls["new"], body)).json()
    n = a["usage"]["completion_tokens"]
    assert n == b["usage"]["completion_tokens"] and 8 <= n < 1000
    assert a["choices"][0]["finish_reason"] == "stop"
    c = (await _post(api_fleet.urls["new"], {**body, "min_tokens": 500})).json()
    assert c["usage"]["completion_tokens"] == 500


async def test_logprobs_as_token_ids(api_fleet: SimFleet) -> None:
    """logprobs with return_tokens_as_token_ids give "token_id:N" strings matching token_ids."""
    body = {
        "model": "m",
        "prompt": PROMPT,
        "max_tokens": 5,
        "ignore_eos": True,
        "logprobs": 1,
        "return_tokens_as_token_ids": True,
        "return_token_ids": True,
    }
    doc = (await _post(api_fleet.urls["new"], body)).json()
    choice = doc["choices"][0]
    assert choice["logprobs"]["tokens"] == [f"token_id:{i}" for i in choice["token_ids"]]


async def test_stream_interval_groups_tokens(api_fleet: SimFleet) -> None:
    """A 0.33 per-request stream_interval puts several tokens in a chunk (first, last alone)."""
    async with EngineClient(api_fleet.urls["new"]) as client:
        body = completion_body(
            model="m",
            prompt=PROMPT,
            max_tokens=10,
            return_token_ids=True,
            extra={"stream_interval": 4},
        )
        rec = await client.stream_completion(body, request_id="interval")
    assert rec.chunk_tokens == [1, 4, 4, 1]
    assert rec.completion_tokens == 10


@pytest.mark.parametrize(
    ("iid", "max_tokens", "status", "fragment"),
    [
        ("old", 100, 400, "maximum context length is 3996 tokens"),
        ("new", 5000, 400, "cannot be greater than max_model_len=4096"),
    ],
)
async def test_max_model_len_rejections(
    api_fleet: SimFleet, iid: str, max_tokens: int, status: int, fragment: str
) -> None:
    """Prompt + max_tokens over max_model_len: 400 with the version's message."""
    resp = await _post(api_fleet.urls[iid], {"prompt": [5] * 4000, "max_tokens": max_tokens})
    assert resp.status_code == status
    assert fragment in resp.json()["error"]["message"]


async def test_max_model_len_clamp_033(api_fleet: SimFleet) -> None:
    """The 0.33 engine shortens max_tokens to max_model_len - prompt, finishing 'length'."""
    doc = (
        await _post(
            api_fleet.urls["new"], {"prompt": [5] * 4090, "max_tokens": 100, "ignore_eos": True}
        )
    ).json()
    assert doc["usage"]["completion_tokens"] == 6
    assert doc["choices"][0]["finish_reason"] == "length"


async def test_errors_are_vllm_shaped(api_fleet: SimFleet) -> None:
    """Unknown model 404, min_tokens > max_tokens 400, bad content type 400: vLLM bodies."""
    async with EngineClient(api_fleet.urls["new"]) as client:
        with pytest.raises(EngineHTTPError) as info:
            await client.complete({"model": "nope", "prompt": "x", "max_tokens": 2})
    assert info.value.status == 404
    resp = await _post(api_fleet.urls["old"], {"prompt": "x", "max_tokens": 2, "min_tokens": 3})
    err = resp.json()["error"]
    assert resp.status_code == 400 and err["type"] == "BadRequestError" and err["code"] == 400
    async with httpx.AsyncClient() as c:
        bad = await c.post(
            api_fleet.urls["old"] + "/tokenize",
            content=b"{}",
            headers={"content-type": "text/plain"},
        )
    assert bad.status_code == 400 and "Unsupported Media Type" in bad.json()["error"]["message"]


async def test_models_version_metrics(api_fleet: SimFleet) -> None:
    """/v1/models, /version and /metrics answer with vLLM names (parsed by a Prometheus parser)."""
    async with EngineClient(api_fleet.urls["new"]) as client:
        cards = await client.models()
        assert [(c.id, c.max_model_len) for c in cards] == [("m", 4096)]
        assert await client.version() == "0.33.0"
        snap = await client.metrics()
        assert snap.value("vllm:num_requests_running") == 0.0
        cache = snap.cache_config()
        assert (
            cache is not None
            and cache["enable_prefix_caching"] == "False"
            and cache["engine"] == "0"
        )
        assert snap.process_start_time_seconds is not None
    async with httpx.AsyncClient() as c:
        text = (await c.get(api_fleet.urls["new"] + "/metrics")).text
    names = {f.name for f in text_string_to_metric_families(text)}
    assert {
        "vllm:time_to_first_token_seconds",
        "vllm:inter_token_latency_seconds",
        "vllm:prompt_tokens",
        "vllm:kv_cache_usage_perc",
        "vllm:num_requests_waiting",
    } <= names


async def test_engines_before_0_10_2_ignore_return_token_ids(tmp_path: Path) -> None:
    """A 0.10.1 engine has no return_token_ids field: the ids never come back, logprobs still do."""
    cfg = sim_config({"preset": "tiny"}, old={"version": "0.10.1"})
    engines = [{"iid": "old", "role": "mixed", "model": "m"}]
    with start_sim_fleet(tmp_path, engines, sim_config=cfg) as fleet:
        body = {"model": "m", "prompt": PROMPT, "max_tokens": 5, "ignore_eos": True}
        plain = (await _post(fleet.urls["old"], {**body, "return_token_ids": True})).json()
        probes = {**body, "logprobs": 1, "return_tokens_as_token_ids": True}
        traced = (await _post(fleet.urls["old"], probes)).json()
    assert plain["choices"][0]["token_ids"] is None
    assert plain["choices"][0]["prompt_token_ids"] is None
    tokens = traced["choices"][0]["logprobs"]["tokens"]
    assert len(tokens) == 5 and all(t.startswith("token_id:") for t in tokens)
