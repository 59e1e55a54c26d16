"""stream_completion over real loopback sockets: chunked SSE framing and 64 concurrent streams."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest

from narwhal_engine_client import EngineClient, completion_body

STREAMS = 64
TOKENS = 5


def _event(obj: object) -> bytes:
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


class _HoldingServer:
    """A minimal HTTP/1.1 SSE engine answering only once ``expected`` requests are open."""

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.open = 0
        self.all_open = asyncio.Event()
        self.request_ids: list[str] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            headers = {}
            for line in head.decode().split("\r\n")[1:]:
                if ":" in line:
                    name, value = line.split(":", 1)
                    headers[name.strip().lower()] = value.strip()
            await reader.readexactly(int(headers["content-length"]))
            self.request_ids.append(headers["x-request-id"])
            self.open += 1
            if self.open >= self.expected:
                self.all_open.set()
            await self.all_open.wait()
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                b"transfer-encoding: chunked\r\n\r\n"
            )
            events = [
                _event({"choices": [{"index": 0, "text": "t", "token_ids": [i]}], "usage": None})
                for i in range(TOKENS)
            ]
            events.append(
                _event({"choices": [], "usage": {"prompt_tokens": 2, "completion_tokens": TOKENS}})
            )
            events.append(b"data: [DONE]\n\n")
            for data in events:
                writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                await writer.drain()
            writer.write(b"0\r\n\r\n")
            await writer.drain()
        finally:
            writer.close()


@pytest.fixture
async def holding_server() -> AsyncIterator[tuple[str, _HoldingServer]]:
    """A loopback server that releases its answers once 64 requests are open concurrently."""
    state = _HoldingServer(STREAMS)
    server = await asyncio.start_server(state.handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", state
    finally:
        server.close()
        await server.wait_closed()


async def test_64_concurrent_streams_over_loopback(holding_server):
    """64 streams are open at once on one client and each records every token from real sockets."""
    url, state = holding_server
    body = completion_body(model="m", prompt=[1, 2], max_tokens=TOKENS)
    async with EngineClient(url, timeout_s=20) as client:
        records = await asyncio.gather(
            *(
                client.stream_completion(body, request_id=f"r{i}", keep_token_ids=True)
                for i in range(STREAMS)
            )
        )
    assert [r.error for r in records] == [None] * STREAMS
    assert all(r.ok for r in records)
    assert {r.completion_tokens for r in records} == {TOKENS}
    assert {tuple(r.token_ids or []) for r in records} == {tuple(range(TOKENS))}
    assert all(r.first_token_ns is not None and r.first_token_ns > r.send_ns for r in records)
    assert sorted(state.request_ids) == sorted(f"r{i}" for i in range(STREAMS))


async def test_send_time_is_taken_when_the_request_head_goes_out():
    """On real sockets, send_ns comes from the moment httpx starts writing the request head.

    The clock hands out 1, 2, 3, ...: 1 is the provisional stamp before ``httpx.send``; the trace
    hook must replace it with the next value, so httpx's own request preparation is not counted in
    TTFT.
    """
    state = _HoldingServer(1)
    server = await asyncio.start_server(state.handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    ticks = iter(range(1, 1_000))
    try:
        async with EngineClient(
            f"http://127.0.0.1:{port}", timeout_s=20, clock_ns=lambda: next(ticks)
        ) as client:
            record = await client.stream_completion(
                completion_body(model="m", prompt=[1, 2], max_tokens=TOKENS), request_id="r0"
            )
    finally:
        server.close()
        await server.wait_closed()
    assert record.ok
    assert record.send_ns == 2
    assert record.first_token_ns is not None and record.first_token_ns > 2
