"""A minimal vLLM-shaped completion server that stamps its own send times (the fidelity reference).

It serves just what ``narwhal-trial run`` needs: ``GET /v1/models``, ``GET /metrics`` (drain gauges
at zero), and streaming ``POST /v1/completions`` that answers ``max_tokens`` one-token SSE chunks:
the first after ``--ttft`` seconds, then one every ``--tpot`` seconds on an absolute schedule,
then a usage chunk and ``[DONE]``. For every request it records, on CLOCK_MONOTONIC (the clock
``time.perf_counter_ns`` reads in every process on Linux, so the client's times compare directly):
when the request's first byte arrived and when each content chunk was handed to the socket.
``GET /_stamps`` returns them as JSON keyed by ``X-Request-Id``.

Run: ``python bench/trial_stamping_server.py --port 0 --ttft 0.1 --tpot 0.02`` (prints the port).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import time
from typing import Any

MODEL = "stamp"


class StampServer:
    """HTTP/1.1 keep-alive server over asyncio streams; no per-chunk work beyond write + stamp."""

    def __init__(self, ttft_s: float, tpot_s: float) -> None:
        self.ttft_ns = int(ttft_s * 1e9)
        self.tpot_ns = int(tpot_s * 1e9)
        self.stamps: dict[str, dict[str, Any]] = {}
        self.resident = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Serve requests on one connection until the client closes it."""
        try:
            while True:
                first = await reader.readline()
                if not first:
                    return
                arrived = time.perf_counter_ns()
                method, path, _ = first.decode("latin-1").split(" ", 2)
                headers: dict[str, str] = {}
                while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
                    key, _, value = line.decode("latin-1").partition(":")
                    headers[key.strip().lower()] = value.strip()
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                if method == "POST" and path == "/v1/completions":
                    await self._complete(writer, headers, body, arrived)
                elif path == "/v1/models":
                    card = {"id": MODEL, "object": "model", "root": MODEL, "max_model_len": 65536}
                    await _send_json(writer, {"object": "list", "data": [card]})
                elif path == "/metrics":
                    text = (
                        "# TYPE narwhal_router_admission_queue_depth gauge\n"
                        "narwhal_router_admission_queue_depth 0\n"
                        "# TYPE narwhal_router_resident_requests gauge\n"
                        f"narwhal_router_resident_requests {self.resident}\n"
                    )
                    await _send(writer, 200, "text/plain; version=0.0.4", text.encode())
                elif path == "/_stamps":
                    await _send_json(writer, self.stamps)
                else:
                    await _send(writer, 404, "application/json", b'{"detail":"Not Found"}')
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            writer.close()

    async def _complete(
        self, writer: asyncio.StreamWriter, headers: dict[str, str], body: bytes, arrived: int
    ) -> None:
        doc = json.loads(body)
        rid = headers.get("x-request-id", "")
        tokens = int(doc.get("max_tokens", 16))
        prompt = len(doc.get("prompt", []))
        self.resident += 1
        sent: list[int] = []
        self.stamps[rid] = {"arrived_ns": arrived, "chunk_ns": sent, "tokens": tokens}
        try:
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                b"transfer-encoding: chunked\r\n\r\n"
            )
            head = b'data: {"id":"cmpl-' + rid.encode() + b'","object":"text_completion","model":"'
            head += MODEL.encode() + b'","choices":[{"index":0,"text":" x","token_ids":[7],'
            start = arrived + self.ttft_ns
            for i in range(tokens):
                due = start + i * self.tpot_ns
                delay = (due - time.perf_counter_ns()) / 1e9
                if delay > 0:
                    await asyncio.sleep(delay)
                reason = b'"length"' if i == tokens - 1 else b"null"
                event = head + b'"finish_reason":' + reason + b"}]}\n\n"
                sent.append(time.perf_counter_ns())
                writer.write(_chunk(event))
                await writer.drain()
            usage = {
                "prompt_tokens": prompt,
                "completion_tokens": tokens,
                "total_tokens": prompt + tokens,
            }
            tail = json.dumps({"id": f"cmpl-{rid}", "choices": [], "usage": usage})
            writer.write(_chunk(f"data: {tail}\n\n".encode()) + _chunk(b"data: [DONE]\n\n"))
            writer.write(b"0\r\n\r\n")
            await writer.drain()
        finally:
            self.resident -= 1


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


async def _send(writer: asyncio.StreamWriter, status: int, ctype: str, data: bytes) -> None:
    head = f"HTTP/1.1 {status} X\r\ncontent-type: {ctype}\r\ncontent-length: {len(data)}\r\n\r\n"
    writer.write(head.encode() + data)
    await writer.drain()


async def _send_json(writer: asyncio.StreamWriter, doc: Any) -> None:
    await _send(writer, 200, "application/json", json.dumps(doc).encode())


async def serve(port: int, ttft_s: float, tpot_s: float) -> None:
    """Listen on 127.0.0.1:port forever; print the bound port on stdout."""
    server = StampServer(ttft_s, tpot_s)
    listener = await asyncio.start_server(server.handle, "127.0.0.1", port, backlog=1024)
    print(listener.sockets[0].getsockname()[1], flush=True)
    async with listener:
        await listener.serve_forever()


def main() -> None:
    """Command line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--ttft", type=float, default=0.1, help="seconds to the first chunk")
    parser.add_argument("--tpot", type=float, default=0.02, help="seconds between chunks")
    args = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(args.port, args.ttft, args.tpot))


if __name__ == "__main__":
    main()
