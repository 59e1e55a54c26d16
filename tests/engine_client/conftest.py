"""Fixtures for narwhal_engine_client tests: SSE payloads in the vLLM 0.11 and 0.33 layouts."""

from __future__ import annotations

import asyncio
import itertools
import json
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
import uvloop

BASE = "http://engine.test"


class ChunkStream(httpx.AsyncByteStream):
    """A response body delivered as separate network reads (one per item)."""

    def __init__(self, parts: Iterable[bytes], fail_with: Exception | None = None) -> None:
        self.parts = list(parts)
        self.fail_with = fail_with

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for part in self.parts:
            yield part
        if self.fail_with is not None:
            raise self.fail_with


def event(obj: Any) -> bytes:
    """One SSE event, compact like pydantic's model_dump_json."""
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


DONE = b"data: [DONE]\n\n"

ONE_ID: list[int] = [100]
"""The default ``token_ids`` of a content chunk: one token, as vLLM sends with
``return_token_ids`` (which every timed stream asks for). Pass ``token_ids=None`` for a chunk
that carries no count."""


def chunk_011(
    text: str,
    *,
    finish: str | None = None,
    prompt_ids: list[int] | None = None,
    token_ids: list[int] | None = ONE_ID,
) -> bytes:
    """A 0.11 content chunk (exclude_unset=False): ``usage: null``, every choice field present."""
    return event(
        {
            "id": "cmpl-r1",
            "object": "text_completion",
            "created": 1700000000,
            "model": "llama",
            "choices": [
                {
                    "index": 0,
                    "text": text,
                    "logprobs": None,
                    "finish_reason": finish,
                    "stop_reason": None,
                    "prompt_token_ids": prompt_ids,
                    "token_ids": token_ids,
                }
            ],
            "usage": None,
        }
    )


def chunk_033(
    text: str,
    *,
    finish: str | None = None,
    token_ids: list[int] | None = ONE_ID,
    usage: dict[str, int] | None = None,
    fingerprint: bool = False,
) -> bytes:
    """A 0.33 content chunk (exclude_unset=True): no ``usage`` key unless continuous stats."""
    obj: dict[str, Any] = {
        "id": "cmpl-r1",
        "object": "text_completion",
        "created": 1700000000,
        "model": "llama",
        "choices": [
            {
                "index": 0,
                "text": text,
                "logprobs": None,
                "finish_reason": finish,
                "stop_reason": None,
                "prompt_token_ids": None,
                "token_ids": token_ids,
                "weight_versions": None,
            }
        ],
        "kv_transfer_params": None,
    }
    if usage is not None:
        obj["usage"] = usage
    if fingerprint:
        obj["system_fingerprint"] = "vllm-0.33.0-abcd1234"
    return event(obj)


def usage_chunk(prompt: int, completion: int) -> bytes:
    """The separate usage chunk: ``choices: []`` and the totals."""
    return event(
        {
            "id": "cmpl-r1",
            "object": "text_completion",
            "created": 1700000000,
            "model": "llama",
            "choices": [],
            "usage": {
                "prompt_tokens": prompt,
                "total_tokens": prompt + completion,
                "completion_tokens": completion,
            },
        }
    )


@pytest.fixture
def fake_clock() -> Callable[[], int]:
    """A clock returning 1000, 2000, 3000, ... nanoseconds, one step per call."""
    counter = itertools.count(1000, 1000)
    return lambda: next(counter)


@pytest.fixture
def closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


class Sse:
    """The payload builders, handed to tests through the ``sse`` fixture."""

    event = staticmethod(event)
    chunk_011 = staticmethod(chunk_011)
    chunk_033 = staticmethod(chunk_033)
    usage_chunk = staticmethod(usage_chunk)
    DONE = DONE
    BASE = BASE

    @staticmethod
    def response(parts: Iterable[bytes], fail_with: Exception | None = None) -> httpx.Response:
        """An HTTP 200 SSE response whose body arrives as the given reads."""
        return httpx.Response(
            200,
            headers={"content-type": "text/event-stream"},
            stream=ChunkStream(parts, fail_with),
        )


@pytest.fixture
def sse() -> type[Sse]:
    """SSE payload builders (0.11 and 0.33 layouts) and a streaming response factory."""
    return Sse


HTTP_ERROR_CASES = [
    (
        400,
        {
            "error": {
                "message": "max_tokens too big",
                "type": "BadRequestError",
                "param": None,
                "code": 400,
            }
        },
        "max_tokens too big",
        "BadRequestError",
    ),
    (
        404,
        {
            "object": "error",
            "message": "The model `x` does not exist.",
            "type": "NotFoundError",
            "param": None,
            "code": 404,
        },
        "The model `x` does not exist.",
        "NotFoundError",
    ),
    (401, {"error": "Unauthorized"}, "Unauthorized", None),
]
"""Non-200 bodies as vLLM writes them (nested >= 0.10.1, flat before, the api-key middleware's 401)
and the message and type EngineHTTPError must carry."""


@dataclass
class Request:
    """One request as the server read it."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes


Respond = Callable[[Request, asyncio.StreamWriter], Awaitable[None]]


@dataclass
class Engine:
    """A scripted loopback HTTP/1.1 server: ``respond`` writes each answer (keep-alive)."""

    respond: Respond
    url: str = ""
    connections: int = 0
    requests: list[Request] = field(default_factory=list)
    writers: list[asyncio.StreamWriter] = field(default_factory=list)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.writers.append(writer)
        try:
            while not writer.is_closing():
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                first, *lines = head.decode("latin-1").split("\r\n")
                method, path, _ = first.split(" ", 2)
                headers = {}
                for line in lines:
                    if ":" in line:
                        name, value = line.split(":", 1)
                        headers[name.strip().lower()] = value.strip()
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                request = Request(method, path, headers, body)
                self.requests.append(request)
                await self.respond(request, writer)
        except ConnectionError:
            return
        finally:
            writer.close()


@pytest.fixture
async def serve() -> AsyncIterator[Callable[[Respond], Awaitable[Engine]]]:
    """Start scripted engines on loopback; all are stopped after the test."""
    servers: list[tuple[asyncio.Server, Engine]] = []

    async def start(respond: Respond) -> Engine:
        engine = Engine(respond)
        server = await asyncio.start_server(engine.handle, "127.0.0.1", 0)
        engine.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        servers.append((server, engine))
        return engine

    yield start
    for server, engine in servers:
        server.close()
        for writer in engine.writers:
            writer.close()
        await server.wait_closed()


def pytest_asyncio_loop_factories(
    config: pytest.Config, item: pytest.Item
) -> dict[str, Callable[[], asyncio.AbstractEventLoop]]:
    """Every asynchronous test here runs twice: on asyncio's own loop and on uvloop's, the one
    vLLM's and Dynamo's environments hold (its transports are no subclass of asyncio's)."""
    del config, item
    return {"asyncio": asyncio.new_event_loop, "uvloop": uvloop.new_event_loop}
