"""A minimal stamping counterpart of vLLM's OpenAI ``/v1/completions`` for client benchmarks.

One asyncio process, no dependencies beyond the standard library (orjson when importable). Every
completion emits exactly ``max_tokens`` tokens, one SSE chunk per token: the first at ``ttft``
after the request body was read, then one every ``token interval`` on an absolute per-request
schedule. The server STAMPS with ``time.monotonic_ns()`` each request's arrival (the moment its
head was fully read) and the send time of every chunk, keyed by request id (``X-Request-Id``,
else the body's ``request_id``, else a generated one); the stamps go to a JSON-lines file when the
server stops (SIGTERM or SIGINT).

Also served: ``GET /health``, ``GET /v1/models``, ``GET /version``, ``POST /tokenize`` and
``GET /metrics`` with the router drain gauges (``narwhal_router_admission_queue_depth 0``,
``narwhal_router_resident_requests N``) so a trial's drain check works. Framing follows vLLM 0.33
(``data: {json}\\n\\n`` events, an optional usage chunk, ``data: [DONE]``), chunked transfer
encoding, HTTP/1.1 keep-alive. Run it as a script::

    python bench/clients/counterpart.py --port 18123 --stamps stamps.jsonl --ttft-ms 10 --token-ms 5
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import signal
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

_loads: Callable[[bytes], Any]
_dumps: Callable[[Any], bytes]
try:  # orjson when the interpreter has it; the server works without it
    import orjson

    _loads = orjson.loads
    _dumps = orjson.dumps
except ImportError:  # pragma: no cover - depends on the interpreter used

    def _dumps(obj: Any) -> bytes:
        return json.dumps(obj, separators=(",", ":")).encode()

    _loads = json.loads

STAMP_FORMAT = "narwhal.bench.counterpart.stamp"
HEAD_LIMIT = 65536
BODY_LIMIT = 64 * 1024 * 1024
_WORDS = re.compile(rb"\w+|[^\w\s]")
_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed"}
_TERMINATOR = b"0\r\n\r\n"


@dataclass(frozen=True, slots=True)
class Config:
    """What the counterpart serves and how fast."""

    model: str
    max_model_len: int
    ttft_s: float
    token_s: float
    token_text: str


@dataclass(slots=True)
class Stamp:
    """One completion request as the server saw it; times are ``time.monotonic_ns()``."""

    request_id: str
    arrival_ns: int
    stream: bool
    body_ns: int = 0
    max_tokens: int = 0
    prompt_tokens: int = 0
    chunk_ns: list[int] = field(default_factory=list)
    status: int = 200
    completed: bool = False

    def document(self) -> dict[str, Any]:
        """The stamp's JSON line."""
        return {
            "format": STAMP_FORMAT,
            "format_version": 1,
            "request_id": self.request_id,
            "arrival_ns": self.arrival_ns,
            "body_ns": self.body_ns,
            "stream": self.stream,
            "max_tokens": self.max_tokens,
            "prompt_tokens": self.prompt_tokens,
            "status": self.status,
            "completed": self.completed,
            "chunk_ns": self.chunk_ns,
        }


@dataclass(slots=True)
class State:
    """Everything the server keeps across connections."""

    config: Config
    stamps: list[Stamp] = field(default_factory=list)
    resident: int = 0


def _chunk(payload: bytes) -> bytes:
    """One HTTP/1.1 chunk holding ``payload``."""
    return b"%x\r\n%s\r\n" % (len(payload), payload)


def _count_prompt(prompt: Any) -> int:
    if isinstance(prompt, list):
        if prompt and isinstance(prompt[0], list):
            return sum(len(p) for p in prompt)
        if prompt and isinstance(prompt[0], str):
            return sum(len(_WORDS.findall(p.encode())) for p in prompt)
        return len(prompt)
    if isinstance(prompt, str):
        return len(_WORDS.findall(prompt.encode()))
    return 0


def _token_id(k: int) -> int:
    return 100 + (k * 7919) % 4000


def _bool(value: Any) -> bool:
    return value is True


class Connection(asyncio.Protocol):
    """One HTTP/1.1 connection: parses requests one at a time and answers them."""

    def __init__(self, state: State) -> None:
        self.state = state
        self.loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.head: tuple[str, str, dict[str, str], int] | None = None
        self.busy = False
        self.closed = False
        self.keep_alive = True

    # -- transport callbacks --
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True

    def data_received(self, data: bytes) -> None:
        self.buf += data
        if not self.busy:
            self._parse()

    # -- request parsing --
    def _parse(self) -> None:
        while not self.busy and not self.closed:
            if self.head is None:
                end = self.buf.find(b"\r\n\r\n")
                if end < 0:
                    if len(self.buf) > HEAD_LIMIT:
                        self._simple(400, b'{"error":"request head too large"}', close=True)
                    return
                arrival = time.monotonic_ns()
                lines = bytes(self.buf[:end]).decode("latin-1").split("\r\n")
                del self.buf[: end + 4]
                parts = lines[0].split(" ")
                if len(parts) != 3:
                    self._simple(400, b'{"error":"bad request line"}', close=True)
                    return
                headers: dict[str, str] = {}
                for line in lines[1:]:
                    name, _, value = line.partition(":")
                    headers[name.strip().lower()] = value.strip()
                self.head = (parts[0], parts[1], headers, arrival)
                self.keep_alive = headers.get("connection", "").lower() != "close"
            method, target, headers, arrival = self.head
            try:
                length = int(headers.get("content-length", "0"))
            except ValueError:
                length = -1
            if length < 0 or length > BODY_LIMIT:
                self._simple(400, b'{"error":"bad content-length"}', close=True)
                return
            if len(self.buf) < length:
                return
            body = bytes(self.buf[:length])
            del self.buf[:length]
            self.head = None
            self._dispatch(method, target.split("?", 1)[0], headers, body, arrival)

    def _dispatch(
        self, method: str, path: str, headers: dict[str, str], body: bytes, arrival: int
    ) -> None:
        cfg = self.state.config
        if path == "/v1/completions" and method == "POST":
            self._completion(headers, body, arrival)
        elif path in ("/health", "/ping") and method == "GET":
            self._simple(200, b"", content_type=None)
        elif path == "/v1/models" and method == "GET":
            card = {
                "id": cfg.model,
                "object": "model",
                "created": int(time.time()),
                "owned_by": "vllm",
                "root": cfg.model,
                "parent": None,
                "max_model_len": cfg.max_model_len,
                "permission": [],
            }
            self._simple(200, _dumps({"object": "list", "data": [card]}))
        elif path == "/version" and method == "GET":
            self._simple(200, b'{"version":"counterpart"}')
        elif path == "/tokenize" and method == "POST":
            self._tokenize(body)
        elif path == "/metrics" and method == "GET":
            self._simple(200, self._metrics(), content_type="text/plain; version=0.0.4")
        else:
            self._simple(404, b'{"error":{"message":"not found","type":"NotFoundError"}}')

    # -- answers --
    def _simple(
        self,
        status: int,
        payload: bytes,
        *,
        content_type: str | None = "application/json",
        close: bool = False,
    ) -> None:
        if self.transport is None or self.closed:
            return
        close = close or not self.keep_alive
        head = f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\n"
        if content_type is not None:
            head += f"content-type: {content_type}\r\n"
        head += f"content-length: {len(payload)}\r\n"
        head += "connection: close\r\n\r\n" if close else "\r\n"
        self.transport.write(head.encode("latin-1") + payload)
        if close:
            self.transport.close()
            self.closed = True

    def _metrics(self) -> bytes:
        n = self.state.resident
        m = self.state.config.model
        return (
            "# TYPE narwhal_router_admission_queue_depth gauge\n"
            "narwhal_router_admission_queue_depth 0\n"
            "# TYPE narwhal_router_resident_requests gauge\n"
            f"narwhal_router_resident_requests {n}\n"
            "# TYPE vllm:num_requests_running gauge\n"
            f'vllm:num_requests_running{{model_name="{m}"}} {n}\n'
            "# TYPE vllm:num_requests_waiting gauge\n"
            f'vllm:num_requests_waiting{{model_name="{m}"}} 0\n'
        ).encode()

    def _tokenize(self, body: bytes) -> None:
        try:
            doc = _loads(body)
        except ValueError:
            self._simple(400, b'{"error":{"message":"body is not JSON","code":400}}')
            return
        count = _count_prompt(doc.get("prompt") if isinstance(doc, dict) else None)
        tokens = [_token_id(k) for k in range(count)]
        answer = {
            "count": count,
            "max_model_len": self.state.config.max_model_len,
            "tokens": tokens,
            "token_strs": None,
        }
        self._simple(200, _dumps(answer))

    def _completion(self, headers: dict[str, str], body: bytes, arrival: int) -> None:
        body_ns = time.monotonic_ns()
        try:
            doc = _loads(body)
            if not isinstance(doc, dict):
                raise ValueError("not an object")
        except ValueError:
            stamp = Stamp(f"invalid-{uuid.uuid4().hex[:12]}", arrival, False, body_ns, status=400)
            self.state.stamps.append(stamp)
            self._simple(400, b'{"error":{"message":"body is not a JSON object","code":400}}')
            return
        rid = headers.get("x-request-id") or doc.get("request_id") or uuid.uuid4().hex[:16]
        stream = _bool(doc.get("stream"))
        max_tokens = doc.get("max_tokens")
        n = max_tokens if isinstance(max_tokens, int) and max_tokens > 0 else 16
        stamp = Stamp(str(rid), arrival, stream, body_ns, n, _count_prompt(doc.get("prompt")))
        self.state.stamps.append(stamp)
        options = doc.get("stream_options")
        usage = isinstance(options, dict) and _bool(options.get("include_usage"))
        running = (
            usage and isinstance(options, dict) and _bool(options.get("continuous_usage_stats"))
        )
        ids = _bool(doc.get("return_token_ids"))
        self.busy = True
        self.state.resident += 1
        first = self.loop.time() + self.state.config.ttft_s
        if stream:
            _Stream(self, stamp, first, usage=usage, running=running, ids=ids).start()
        else:
            self.loop.call_at(first + (n - 1) * self.state.config.token_s, self._whole, stamp, ids)

    def _whole(self, stamp: Stamp, ids: bool) -> None:
        cfg = self.state.config
        n = stamp.max_tokens
        choice: dict[str, Any] = {
            "index": 0,
            "text": cfg.token_text * n,
            "logprobs": None,
            "finish_reason": "length",
            "stop_reason": None,
            "token_ids": [_token_id(k) for k in range(n)] if ids else None,
            "prompt_token_ids": [_token_id(k) for k in range(stamp.prompt_tokens)] if ids else None,
        }
        usage = {
            "prompt_tokens": stamp.prompt_tokens,
            "total_tokens": stamp.prompt_tokens + n,
            "completion_tokens": n,
        }
        doc = {
            "id": f"cmpl-{stamp.request_id}",
            "object": "text_completion",
            "created": int(time.time()),
            "model": cfg.model,
            "choices": [choice],
            "usage": usage,
        }
        payload = _dumps(doc)
        stamp.chunk_ns.append(time.monotonic_ns())
        self._simple(200, payload)
        self.finished(stamp, True)

    def finished(self, stamp: Stamp, completed: bool) -> None:
        """A response ended (or its connection broke): free the connection for the next one."""
        stamp.completed = completed
        self.state.resident -= 1
        self.busy = False
        if self.buf and not self.closed:
            self._parse()


class _Stream:
    """The token chunks of one streaming answer, each sent on its absolute due time."""

    __slots__ = ("conn", "first", "ids", "n", "prefix", "running", "stamp", "suffix", "usage")

    def __init__(
        self,
        conn: Connection,
        stamp: Stamp,
        first: float,
        *,
        usage: bool,
        running: bool,
        ids: bool,
    ) -> None:
        cfg = conn.state.config
        self.conn = conn
        self.stamp = stamp
        self.first = first
        self.n = stamp.max_tokens
        self.usage = usage
        self.running = running
        self.ids = ids
        created = int(time.time())
        head = _dumps(
            {"id": f"cmpl-{stamp.request_id}", "object": "text_completion", "created": created}
        )[:-1]
        model = _dumps(cfg.model)
        text = _dumps(cfg.token_text)
        self.prefix = (
            b"data: "
            + head
            + b',"model":'
            + model
            + b',"choices":[{"index":0,"text":'
            + text
            + b',"logprobs":null,"finish_reason":'
        )
        self.suffix = b',"weight_versions":null}],"kv_transfer_params":null'

    def start(self) -> None:
        transport = self.conn.transport
        if transport is None or self.conn.closed:
            self.conn.finished(self.stamp, False)
            return
        transport.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
            b"transfer-encoding: chunked\r\n"
            + (b"\r\n" if self.conn.keep_alive else b"connection: close\r\n\r\n")
        )
        self.conn.loop.call_at(self.first, self.tick, 0)

    def _event(self, k: int) -> bytes:
        last = k == self.n - 1
        reason = b'"length"' if last else b"null"
        if self.ids:
            prompt = b"null"
            if k == 0:
                prompt = _dumps([_token_id(i) for i in range(self.stamp.prompt_tokens)])
            ids = b"[%d]" % _token_id(k)
        else:
            prompt = ids = b"null"
        middle = b',"stop_reason":null,"prompt_token_ids":' + prompt + b',"token_ids":' + ids
        tail = b"}\n\n"
        if self.running:  # continuous_usage_stats: every chunk carries the cumulative usage
            p = self.stamp.prompt_tokens
            tail = (
                b',"usage":{"prompt_tokens":%d,"total_tokens":%d,"completion_tokens":%d}}\n\n'
                % (
                    p,
                    p + k + 1,
                    k + 1,
                )
            )
        return self.prefix + reason + middle + self.suffix + tail

    def _tail(self) -> bytes:
        out = b""
        if self.usage:
            p, n = self.stamp.prompt_tokens, self.n
            usage = b'{"prompt_tokens":%d,"total_tokens":%d,"completion_tokens":%d}' % (p, p + n, n)
            out += _chunk(
                self.prefix.split(b',"choices":', 1)[0]
                + b',"choices":[],"usage":'
                + usage
                + b"}\n\n"
            )
        return out + _chunk(b"data: [DONE]\n\n") + _TERMINATOR

    def tick(self, k: int) -> None:
        conn = self.conn
        transport = conn.transport
        if transport is None or conn.closed or transport.is_closing():
            conn.finished(self.stamp, False)
            return
        data = _chunk(self._event(k))
        last = k == self.n - 1
        if last:
            data += self._tail()
        now = time.monotonic_ns()
        transport.write(data)
        self.stamp.chunk_ns.append(now)
        if last:
            if not conn.keep_alive:
                transport.close()
                conn.closed = True
            conn.finished(self.stamp, True)
            return
        conn.loop.call_at(self.first + (k + 1) * conn.state.config.token_s, self.tick, k + 1)


def write_stamps(path: Path, stamps: list[Stamp]) -> None:
    """Write every stamp as one JSON line, atomically (temp file in the same folder, rename)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            for stamp in stamps:
                fh.write(_dumps(stamp.document()) + b"\n")
            fh.flush()
            os.fsync(fh.fileno())
        Path(tmp).replace(path)
    except BaseException:
        with contextlib.suppress(OSError):
            Path(tmp).unlink()
        raise


async def serve(config: Config, host: str, port: int, stamps_path: Path) -> None:
    """Serve until SIGTERM or SIGINT, then write the stamps."""
    loop = asyncio.get_running_loop()
    state = State(config)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    server = await loop.create_server(lambda: Connection(state), host, port, backlog=1024)
    print(f"counterpart listening on http://{host}:{port}", flush=True)
    try:
        await stop.wait()
    finally:
        server.close()
        write_stamps(stamps_path, state.stamps)


def main(argv: list[str] | None = None) -> int:
    """Parse the flags and serve."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument(
        "--stamps", type=Path, required=True, help="JSON-lines file written at stop"
    )
    parser.add_argument("--model", default="counterpart")
    parser.add_argument("--max-model-len", type=int, default=16384)
    parser.add_argument("--ttft-ms", type=float, default=10.0, help="first token after arrival")
    parser.add_argument("--token-ms", type=float, default=5.0, help="interval between tokens")
    parser.add_argument("--token-text", default=" the", help="text of every generated token")
    args = parser.parse_args(argv)
    config = Config(
        model=args.model,
        max_model_len=args.max_model_len,
        ttft_s=args.ttft_ms / 1000,
        token_s=args.token_ms / 1000,
        token_text=args.token_text,
    )
    asyncio.run(serve(config, args.host, args.port, args.stamps.resolve()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
