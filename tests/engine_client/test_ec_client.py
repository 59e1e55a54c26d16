"""EngineClient's plain endpoints, construction, and keeping the API key out of everything."""

from __future__ import annotations

import json
import pickle

import httpx
import pytest
import respx

from narwhal_engine_client import (
    EngineClient,
    EngineClientError,
    EngineConnectError,
    EngineHTTPError,
    EngineProtocolError,
    EngineTimeoutError,
    ModelCard,
    TokenizeResult,
    completion_body,
)

BASE = "http://engine.test"
KEY = "sk-SECRET-d41d8cd98f00b204"

MODELS = {
    "object": "list",
    "data": [
        {
            "id": "llama",
            "object": "model",
            "created": 1700000000,
            "owned_by": "vllm",
            "root": "meta-llama/Llama-3.1-8B-Instruct",
            "parent": None,
            "max_model_len": 16384,
            "permission": [{"id": "modelperm-1", "object": "model_permission"}],
        },
        {"id": "lora-a", "object": "model", "root": "/loras/a", "parent": "llama"},
    ],
}


@pytest.mark.parametrize("status", [200, 503])
async def test_health_returns_status(status):
    """health() returns the HTTP status, whatever it is."""
    with respx.mock(base_url=BASE) as mock:
        mock.get("/health").mock(return_value=httpx.Response(status))
        async with EngineClient(BASE) as client:
            assert await client.health() == status


async def test_health_raises_on_refused_port(closed_port):
    """health() raises EngineConnectError when nothing listens."""
    async with EngineClient(f"http://127.0.0.1:{closed_port}", timeout_s=5) as client:
        with pytest.raises(EngineConnectError):
            await client.health()


async def test_version_and_models():
    """version() reads the string; models() parses id, root and max_model_len (None for LoRA)."""
    with respx.mock(base_url=BASE) as mock:
        mock.get("/version").mock(return_value=httpx.Response(200, json={"version": "0.11.0"}))
        mock.get("/v1/models").mock(return_value=httpx.Response(200, json=MODELS))
        async with EngineClient(BASE + "/") as client:
            assert client.base_url == BASE
            assert await client.version() == "0.11.0"
            cards = await client.models()
    assert cards == [
        ModelCard(id="llama", root="meta-llama/Llama-3.1-8B-Instruct", max_model_len=16384),
        ModelCard(id="lora-a", root="/loras/a", max_model_len=None),
    ]


async def test_tokenize_sends_fields_and_parses():
    """tokenize() posts model, prompt and add_special_tokens and returns the typed result."""
    answer = {"count": 2, "max_model_len": 4096, "tokens": [1, 15043], "token_strs": None}
    with respx.mock(base_url=BASE) as mock:
        route = mock.post("/tokenize").mock(return_value=httpx.Response(200, json=answer))
        async with EngineClient(BASE) as client:
            result = await client.tokenize("Hello", model="llama")
    assert result == TokenizeResult(count=2, max_model_len=4096, tokens=[1, 15043])
    assert json.loads(route.calls.last.request.content) == {
        "model": "llama",
        "prompt": "Hello",
        "add_special_tokens": False,
    }


@pytest.mark.parametrize("bad", [0, -1, "4096", None, 4096.0, True])
async def test_tokenize_rejects_bad_max_model_len(bad):
    """A max_model_len that is not a positive integer is an EngineProtocolError naming the value."""
    answer = {"count": 1, "max_model_len": bad, "tokens": [1]}
    with respx.mock(base_url=BASE) as mock:
        mock.post("/tokenize").mock(return_value=httpx.Response(200, json=answer))
        async with EngineClient(BASE) as client:
            with pytest.raises(EngineProtocolError, match="max_model_len") as info:
                await client.tokenize("x")
    assert repr(bad) in str(info.value)


async def test_models_rejects_bad_max_model_len():
    """A zero max_model_len in /v1/models is an EngineProtocolError."""
    doc = {"object": "list", "data": [{"id": "m", "root": "m", "max_model_len": 0}]}
    with respx.mock(base_url=BASE) as mock:
        mock.get("/v1/models").mock(return_value=httpx.Response(200, json=doc))
        async with EngineClient(BASE) as client:
            with pytest.raises(EngineProtocolError, match="got 0"):
                await client.models()


async def test_detokenize():
    """detokenize() posts the token ids and returns the prompt text."""
    with respx.mock(base_url=BASE) as mock:
        route = mock.post("/detokenize").mock(
            return_value=httpx.Response(200, json={"prompt": "Hi"})
        )
        async with EngineClient(BASE) as client:
            assert await client.detokenize([1, 2]) == "Hi"
    assert json.loads(route.calls.last.request.content) == {"tokens": [1, 2]}


async def test_non_json_body_is_protocol_error():
    """A 200 whose body is not JSON is an EngineProtocolError."""
    with respx.mock(base_url=BASE) as mock:
        mock.get("/version").mock(return_value=httpx.Response(200, text="<html>"))
        async with EngineClient(BASE) as client:
            with pytest.raises(EngineProtocolError):
                await client.version()


async def test_complete_returns_body_and_raises_http_error():
    """complete() returns the JSON answer, sends X-Request-Id, and raises EngineHTTPError on 4xx."""
    ok = {"id": "cmpl-x", "choices": [{"text": "hi"}], "usage": {"completion_tokens": 1}}
    bad = {
        "error": {"message": "bad prompt", "type": "BadRequestError", "param": None, "code": 400}
    }
    with respx.mock(base_url=BASE) as mock:
        route = mock.post("/v1/completions").mock(
            side_effect=[httpx.Response(200, json=ok), httpx.Response(400, json=bad)]
        )
        async with EngineClient(BASE) as client:
            assert await client.complete({"prompt": "x"}, request_id="c1") == ok
            with pytest.raises(EngineHTTPError) as info:
                await client.complete({"prompt": ""})
    assert route.calls[0].request.headers["x-request-id"] == "c1"
    assert (info.value.status, info.value.message) == (400, "bad prompt")


async def test_get_timeout_is_wrapped():
    """An httpx timeout on a plain GET becomes EngineTimeoutError, chained to the cause."""
    with respx.mock(base_url=BASE) as mock:
        mock.get("/version").mock(side_effect=httpx.ConnectTimeout("slow"))
        async with EngineClient(BASE) as client:
            with pytest.raises(EngineTimeoutError) as info:
                await client.version()
    assert isinstance(info.value.__cause__, httpx.ConnectTimeout)


async def test_from_env_reads_the_named_variable(monkeypatch):
    """from_env sends the key from the named variable, none for None, and names an unset one."""
    monkeypatch.setenv("NARWHAL_TEST_KEY", KEY)
    with respx.mock(base_url=BASE) as mock:
        route = mock.get("/health").mock(return_value=httpx.Response(200))
        async with EngineClient.from_env(BASE, "NARWHAL_TEST_KEY") as keyed:
            await keyed.health()
        async with EngineClient.from_env(BASE, None) as anonymous:
            await anonymous.health()
    assert route.calls[0].request.headers["authorization"] == f"Bearer {KEY}"
    assert "authorization" not in route.calls[1].request.headers
    monkeypatch.delenv("NARWHAL_TEST_KEY")
    with pytest.raises(EngineClientError, match="NARWHAL_TEST_KEY"):
        EngineClient.from_env(BASE, "NARWHAL_TEST_KEY")


async def test_key_never_in_repr_errors_or_records(closed_port, sse):
    """The API key appears in no repr, error text, pickled error or record, even on failures."""
    seen: list[str] = []
    with respx.mock(base_url=BASE) as mock:
        mock.post("/v1/completions").mock(
            side_effect=[
                httpx.Response(401, json={"error": "Unauthorized"}),
                sse.response(
                    [sse.chunk_033("a"), b'data: {"error": {"message": "boom", "code": 500}}\n\n']
                ),
                httpx.ReadTimeout("timed out"),
                sse.response([sse.chunk_033("a")]),
            ]
        )
        mock.get("/version").mock(return_value=httpx.Response(500, text="oops"))
        async with EngineClient(BASE, api_key=KEY) as client:
            seen.append(repr(client))
            body = completion_body(model="m", prompt=[1], max_tokens=1)
            for i in range(4):
                rec = await client.stream_completion(body, request_id=f"r{i}")
                assert rec.error is not None
                seen += [repr(rec), str(rec.error), repr(rec.error)]
                seen.append(pickle.dumps(rec.error).decode("latin-1"))
            with pytest.raises(EngineHTTPError) as info:
                await client.version()
            seen += [str(info.value), repr(info.value)]
            assert info.value.url == f"{BASE}/version"  # where it was refused, for messages
    async with EngineClient(f"http://127.0.0.1:{closed_port}", api_key=KEY) as refused:
        rec = await refused.stream_completion(body, request_id="r")
        seen += [repr(refused), repr(rec), str(rec.error)]
        with pytest.raises(EngineConnectError) as info2:
            await refused.health()
        seen.append(str(info2.value))
    assert len(seen) > 20
    for text in seen:
        assert KEY not in text
        assert "SECRET" not in text


async def test_a_plain_http_client_does_not_load_the_ca_bundle(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """httpx loads its CA bundle (~50 ms) for every client; a ``http://`` engine's client never
    speaks TLS, so it must not pay for it (a fleet of 32 engines once paid 1.6 s), while an
    ``https://`` engine's client still verifies with the bundle."""
    import certifi

    loads: list[str] = []

    def where() -> str:
        loads.append("ca bundle")
        raise RuntimeError("the CA bundle was loaded")

    monkeypatch.setattr(certifi, "where", where)
    async with EngineClient("HTTP://engine.test:8000"):
        pass
    assert loads == []
    with pytest.raises(RuntimeError, match="CA bundle was loaded"):
        EngineClient("https://engine.test:8443")
    assert loads == ["ca bundle"]
