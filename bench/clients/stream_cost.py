"""Client CPU per streamed chunk of three HTTP stacks, against the stamping counterpart.

A lever study beside the client benchmark, not part of its table: the same closed-loop work
(``--concurrency`` streams, ``--requests`` completions of ``--tokens`` one-token chunks, a
precomputed 512-token body, every SSE event split into lines and decoded with orjson as
narwhal-engine-client does) over
httpx, aiohttp, and a bare ``asyncio.Protocol`` HTTP/1.1 client, on asyncio or uvloop. Prints one
JSON line per run with the process CPU spent in the streaming phase only (imports excluded).

Run with an interpreter that has httpx, aiohttp, uvloop and orjson (the AIPerf bench venv)::

    .bench-venvs/aiperf/bin/python bench/clients/stream_cost.py --url http://127.0.0.1:PORT \\
        --impl httpx --loop asyncio
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import resource
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any, cast
from urllib.parse import urlsplit

_loads: Callable[[bytes], Any] = importlib.import_module("orjson").loads


class _Count:
    """Per-request token counting shared by every stack: split lines, decode each event."""

    __slots__ = ("done", "pending", "tokens")

    def __init__(self) -> None:
        self.pending = b""
        self.tokens = 0
        self.done = False

    def feed(self, data: bytes) -> None:
        if self.pending:
            data = self.pending + data
        lines = data.split(b"\n")
        self.pending = lines.pop()
        for line in lines:
            if not line.startswith(b"data:"):
                continue
            payload = line[5:].strip()
            if payload == b"[DONE]":
                self.done = True
                return
            event = _loads(payload)
            if event.get("choices"):
                self.tokens += 1


def _body(tokens: int) -> bytes:
    doc = {
        "model": "counterpart",
        "prompt": [100 + (i * 7919) % 4000 for i in range(512)],
        "max_tokens": tokens,
        "min_tokens": tokens,
        "temperature": 0.0,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    return json.dumps(doc, separators=(",", ":")).encode()


async def _httpx(url: str, body: bytes, jobs: asyncio.Queue[int], workers: int) -> int:
    httpx: Any = importlib.import_module("httpx")
    limits = httpx.Limits(max_connections=workers, max_keepalive_connections=workers)
    tokens = 0
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=60) as client:

        async def work() -> None:
            nonlocal tokens
            while not jobs.empty():
                jobs.get_nowait()
                count = _Count()
                req = client.build_request(
                    "POST",
                    "/v1/completions",
                    content=body,
                    headers={"Content-Type": "application/json"},
                )
                response = await client.send(req, stream=True)
                async for data in response.aiter_bytes():
                    count.feed(data)
                await response.aclose()
                tokens += count.tokens

        await asyncio.gather(*(work() for _ in range(workers)))
    return tokens


async def _aiohttp(url: str, body: bytes, jobs: asyncio.Queue[int], workers: int) -> int:
    aiohttp: Any = importlib.import_module("aiohttp")
    tokens = 0
    connector = aiohttp.TCPConnector(limit=workers)
    async with aiohttp.ClientSession(base_url=url, connector=connector) as session:

        async def work() -> None:
            nonlocal tokens
            while not jobs.empty():
                jobs.get_nowait()
                count = _Count()
                async with session.post(
                    "/v1/completions", data=body, headers={"Content-Type": "application/json"}
                ) as response:
                    async for data in response.content.iter_any():
                        count.feed(data)
                tokens += count.tokens

        await asyncio.gather(*(work() for _ in range(workers)))
    return tokens


class _RawStream(asyncio.Protocol):
    """One keep-alive HTTP/1.1 connection; answers are chunked SSE streams."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buf = b""
        self.head_done = False
        self.count = _Count()
        self.finished: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is no subclass of it

    def data_received(self, data: bytes) -> None:
        buf = self.buf + data
        if not self.head_done:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                self.buf = buf
                return
            buf = buf[end + 4 :]
            self.head_done = True
        # de-chunk: "<hex>\r\n<payload>\r\n"... ; keep an incomplete chunk for the next read
        out = []
        while True:
            line_end = buf.find(b"\r\n")
            if line_end < 0:
                break
            size = int(buf[:line_end], 16)
            if len(buf) < line_end + 2 + size + 2:
                break
            if size == 0:
                buf = buf[line_end + 4 :]
                if self.finished is not None and not self.finished.done():
                    self.finished.set_result(None)
                break
            out.append(buf[line_end + 2 : line_end + 2 + size])
            buf = buf[line_end + 2 + size + 2 :]
        self.buf = buf
        if out:
            self.count.feed(b"".join(out))

    def connection_lost(self, exc: Exception | None) -> None:
        if self.finished is not None and not self.finished.done():
            self.finished.set_exception(ConnectionError("connection lost"))


async def _raw(url: str, body: bytes, jobs: asyncio.Queue[int], workers: int) -> int:
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    head = (
        f"POST /v1/completions HTTP/1.1\r\nHost: {host}:{port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    request = head + body
    loop = asyncio.get_running_loop()
    tokens = 0

    async def work() -> None:
        nonlocal tokens
        transport, proto = await loop.create_connection(_RawStream, host, port)
        try:
            while not jobs.empty():
                jobs.get_nowait()
                proto.head_done, proto.count = False, _Count()
                proto.finished = loop.create_future()
                transport.write(request)
                await proto.finished
                tokens += proto.count.tokens
        finally:
            transport.close()

    await asyncio.gather(*(work() for _ in range(workers)))
    return tokens


IMPLS: dict[str, Callable[[str, bytes, asyncio.Queue[int], int], Awaitable[int]]] = {
    "httpx": _httpx,
    "aiohttp": _aiohttp,
    "raw": _raw,
}


async def _measure(args: argparse.Namespace) -> dict[str, Any]:
    body = _body(args.tokens)
    jobs: asyncio.Queue[int] = asyncio.Queue()
    for n in range(args.requests):
        jobs.put_nowait(n)
    before = resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter()
    tokens = await IMPLS[args.impl](args.url, body, jobs, args.concurrency)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {
        "impl": args.impl,
        "loop": args.loop,
        "requests": args.requests,
        "concurrency": args.concurrency,
        "tokens": tokens,
        "cpu_s": round(cpu, 4),
        "wall_s": round(wall, 3),
        "cpu_per_request_ms": round(cpu / args.requests * 1e3, 3),
        "cpu_per_chunk_us": round(cpu / max(tokens, 1) * 1e6, 2),
    }


def main(argv: list[str] | None = None) -> int:
    """Parse the flags, stream, print one JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--impl", choices=sorted(IMPLS), required=True)
    parser.add_argument("--loop", choices=("asyncio", "uvloop"), default="asyncio")
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--tokens", type=int, default=128)
    args = parser.parse_args(argv)
    factory = None
    if args.loop == "uvloop":
        factory = importlib.import_module("uvloop").new_event_loop
    with asyncio.Runner(loop_factory=factory) as runner:
        result = runner.run(_measure(args))
    print(json.dumps(result))
    expected = args.requests * args.tokens
    if result["tokens"] != expected:
        print(f"expected {expected} tokens, counted {result['tokens']}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
