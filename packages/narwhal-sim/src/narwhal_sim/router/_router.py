"""The router in front of a simulated fleet: forwards completions, journals every request.

Policy (the predictor of ``narwhal-trial predict`` models it):

1. A completion's *serving engine* is the one with the fewest router-resident requests among the
   ``mixed`` and ``decode`` engines serving the requested model (ties: fleet order); when no such
   engine exists, among every engine serving the model. It counts as resident from the moment the
   router picks it until the response ends.
2. When the serving engine is a ``decode`` engine and a ``prefill`` engine serves the model, the
   request is **split** as vLLM's disaggregated proxy (``toy_proxy_server.py``) does: first the
   ``prefill`` engine with the fewest resident requests (ties: fleet order) gets the body with
   ``max_tokens`` 1, ``stream`` false, no ``stream_options`` or ``min_tokens``, and
   ``kv_transfer_params`` ``{"do_remote_decode": true, ...}``; its answer's ``kv_transfer_params``
   then go with the original body to the decode engine, which skips the prompt's prefill (it waits
   its ``kv_transfer_s_per_token`` per prompt token for the KV, then computes the last prompt token
   only) and streams the output to the client. A prefill answer other than 200 is relayed as the
   response. Mixed engines, and decode engines without a prefill engine, serve whole requests.

Other routes go to the first engine serving the model. The journal records both engines of a split
request (``prefill_engine``, ``prefill_end``; ``null`` for whole requests).

With a key of its own the router answers 401 ``{"error":"Unauthorized"}`` as vLLM does (``/v1``
routes, or every route with ``auth_scope="all"``). Towards an engine it sends that engine's own
key when the engine has one; otherwise a key-less router passes the client's ``Authorization``
through, and a keyed router sends none (its own key is not the engines').
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import orjson

from narwhal_sim._auth import UNAUTHORIZED, authorized
from narwhal_sim._http import HttpServer, Request, Responder
from narwhal_sim._upstream import UpstreamError, UpstreamResponse, send
from narwhal_sim.engine._metrics import render_gauges

_FORWARD_HEADERS = ("x-request-id", "content-type", "accept")
_NOT_FOUND = b'{"detail":"Not Found"}'
ROUTER_OMITS = ("tokenize", "max-model-len", "metrics")
"""What a router can leave out to stand in for one that is not ours: ``/tokenize`` and
``/detokenize``, ``max_model_len`` in ``/v1/models``, the ``/metrics`` page."""
_GETS = ("/v1/models", "/version", "/health")
_POSTS = ("/tokenize", "/detokenize")
_REMOTE_DECODE = {
    "do_remote_decode": True,
    "do_remote_prefill": False,
    "remote_engine_id": None,
    "remote_block_ids": None,
    "remote_host": None,
    "remote_port": None,
}
_UNREACHABLE = (
    b'{"error":{"message":"engine unreachable","type":"BadGateway","param":null,"code":502}}'
)
Relay = Callable[[UpstreamResponse, Responder, dict[str, Any]], Awaitable[None]]
"""Writes an engine's answer back to the client and fills the journal entry's outcome."""
_NO_ENGINE = (
    b'{"error":{"message":"no engine serves that model","type":"NotFoundError",'
    b'"param":"model","code":404}}'
)


@dataclass(slots=True)
class Backend:
    """One engine the router can use."""

    iid: str
    host: str
    port: int
    role: str
    model: str
    resident: int = 0
    api_key: str | None = None
    # the engine's scheduler settings (what a frontend that is not ours reports of its workers)
    max_num_seqs: int = 0
    max_num_batched_tokens: int = 0
    block_size: int = 0
    kv_blocks: int = 0


class Router:
    """HTTP router with an admission queue gauge, a resident gauge and a JSON-lines journal."""

    def __init__(
        self,
        backends: list[Backend],
        *,
        journal: Path | None,
        engine_gauges: Callable[[], list[tuple[str, str, float]]] | None = None,
        api_key: str | None = None,
        auth_scope: str = "v1",
        omit: frozenset[str] = frozenset(),
    ) -> None:
        self.backends = backends
        self.api_key = api_key
        self._guarded = None if auth_scope == "all" else ("/v1",)
        self.omit = omit
        self.queue_depth = 0
        self.resident = 0
        self._journal_path = journal
        self._journal: IO[bytes] | None = None
        self._engine_gauges = engine_gauges
        self.server = HttpServer(self.handle)

    async def start(self, host: str, port: int) -> None:
        """Open the journal (append, 0600) and listen."""
        if self._journal_path is not None:
            self._journal_path.parent.mkdir(parents=True, exist_ok=True)
            fd = _open_append(self._journal_path)
            self._journal = os.fdopen(fd, "ab", buffering=0)  # kept open for the router's life
        await self.server.start(host, port)

    async def stop(self) -> None:
        """Stop listening and close the journal."""
        await self.server.stop()
        if self._journal is not None:
            self._journal.close()
            self._journal = None

    def _pick(self, model: Any, *, completion: bool) -> Backend | None:
        serving = [b for b in self.backends if model in (None, "", b.model)]
        if completion:
            preferred = [b for b in serving if b.role in ("mixed", "decode")] or serving
            return min(preferred, key=lambda b: b.resident, default=None)
        return serving[0] if serving else None

    def _pick_prefill(self, model: Any, serving: Backend) -> Backend | None:
        """The prefill engine of a split request (None: the serving engine does it all)."""
        if serving.role != "decode":
            return None
        prefill = [b for b in self.backends if b.role == "prefill" and model in (None, "", b.model)]
        return min(prefill, key=lambda b: b.resident, default=None)

    async def handle(self, req: Request, resp: Responder) -> None:
        """Route one client request."""
        if not authorized(self.api_key, self._guarded, req):
            resp.send(401, UNAUTHORIZED)
            return
        if req.path == "/metrics" and req.method == "GET" and "metrics" not in self.omit:
            gauges = [
                (
                    "narwhal_router_admission_queue_depth",
                    "Requests received but not yet sent to an engine.",
                    float(self.queue_depth),
                ),
                (
                    "narwhal_router_resident_requests",
                    "Requests sent to an engine and not yet finished.",
                    float(self.resident),
                ),
            ]
            body = render_gauges(gauges)
            if self._engine_gauges is not None:
                body += render_gauges(self._engine_gauges())
            resp.send(200, body, content_type=b"text/plain; version=0.0.4; charset=utf-8")
            return
        if req.path == "/v1/completions" and req.method == "POST":
            await self._completion(req, resp)
            return
        if (req.path in _GETS and req.method == "GET") or (
            req.path in _POSTS and req.method == "POST" and "tokenize" not in self.omit
        ):
            model = None
            if req.method == "POST":
                try:
                    model = orjson.loads(req.body).get("model")
                except (orjson.JSONDecodeError, AttributeError):
                    model = None
            backend = self._pick(model, completion=False)
            if backend is None:
                resp.send(404, _NO_ENGINE)
                return
            await self._relay(req, resp, backend)
            return
        resp.send(404, _NOT_FOUND)

    def _headers(self, req: Request, backend: Backend) -> list[tuple[str, str]]:
        headers = [(k, req.headers[k]) for k in _FORWARD_HEADERS if k in req.headers]
        if backend.api_key is not None:
            headers.append(("authorization", f"Bearer {backend.api_key}"))
        elif self.api_key is None and "authorization" in req.headers:
            headers.append(("authorization", req.headers["authorization"]))
        return headers

    async def _relay(self, req: Request, resp: Responder, backend: Backend) -> None:
        try:
            up = await send(
                backend.host,
                backend.port,
                req.method,
                req.path,
                self._headers(req, backend),
                req.body,
            )
            body = b"".join([part async for part in up.body_parts()])
            up.close()
        except UpstreamError as exc:
            resp.send(
                502,
                orjson.dumps(
                    {
                        "error": {
                            "message": str(exc),
                            "type": "BadGateway",
                            "param": None,
                            "code": 502,
                        }
                    }
                ),
            )
            return
        if req.path == "/v1/models" and up.status == 200 and "max-model-len" in self.omit:
            body = _without_max_model_len(body)
        resp.send(
            up.status,
            body,
            content_type=up.headers.get("content-type", "application/json").encode(),
        )

    async def _completion(self, req: Request, resp: Responder) -> None:
        try:
            doc = orjson.loads(req.body)
        except orjson.JSONDecodeError:
            doc = {}
        doc = doc if isinstance(doc, dict) else {}
        await self._route_completion(req, resp, doc, req.body, self._stream_back)

    def _journal_entry(self, req: Request, doc: dict[str, Any], arrival: float) -> dict[str, Any]:
        """A request's journal entry before it is routed (its request id, nothing known yet)."""
        rid = (
            req.headers.get("x-request-id") or doc.get("request_id") or f"router-{uuid.uuid4().hex}"
        )
        return {
            "request_id": str(rid),
            "engine": None,
            "arrival": arrival,
            "first_token": None,
            "end": None,
            "status": "error",
            "http_status": None,
            "prompt_tokens": None,
            "completion_tokens": None,
            "prefill_engine": None,
            "prefill_end": None,
        }

    async def _route_completion(
        self,
        req: Request,
        resp: Responder,
        doc: dict[str, Any],
        body: bytes,
        relay: Relay,
    ) -> dict[str, Any]:
        """Route one completion (``doc`` parsed from ``body``, which a whole request's engine
        gets); ``relay`` writes the serving engine's answer back. Returns the journal entry."""
        entry = self._journal_entry(req, doc, time.time())
        backend = self._pick(doc.get("model"), completion=True)
        if backend is None:
            resp.send(404, _NO_ENGINE)
            entry.update(end=time.time(), http_status=404, status="no_engine")
            self._write(entry)
            return entry
        entry["engine"] = backend.iid
        prefill = self._pick_prefill(doc.get("model"), backend)
        self.queue_depth += 1
        queued = True
        backend.resident += 1
        try:
            to_engine: bytes | None = body
            if prefill is not None:
                entry["prefill_engine"] = prefill.iid
                self.queue_depth -= 1
                queued = False
                self.resident += 1
                try:
                    to_engine = await self._prefill(req, resp, doc, prefill, entry)
                finally:
                    self.resident -= 1
                if to_engine is None:
                    return entry
                self.queue_depth += 1
                queued = True
            assert to_engine is not None
            up = await send(
                backend.host, backend.port, "POST", req.path, self._headers(req, backend), to_engine
            )
            self.queue_depth -= 1
            queued = False
            self.resident += 1
            try:
                await relay(up, resp, entry)
            finally:
                self.resident -= 1
                up.close()
        except UpstreamError:
            if not resp.done:
                if entry["http_status"] is None:
                    resp.send(502, self._error_body(502, _UNREACHABLE))
                    entry.update(http_status=502, status="error")
                else:
                    resp.abort()
                    entry["status"] = "cut"
        finally:
            if queued:
                self.queue_depth -= 1
            backend.resident -= 1
            entry["end"] = time.time()
            self._write(entry)
        return entry

    def _error_body(self, status: int, body: bytes) -> bytes:
        """The body of an error answer the router gives (an engine's, or its own): unchanged."""
        return body

    async def _prefill(
        self,
        req: Request,
        resp: Responder,
        doc: dict[str, Any],
        prefill: Backend,
        entry: dict[str, Any],
    ) -> bytes | None:
        """The prefill half of a split request; returns the decode engine's body, or None when
        the prefill engine's answer (relayed to the client) ends the request."""
        first = {k: v for k, v in doc.items() if k not in ("stream_options", "min_tokens")}
        first.update(stream=False, max_tokens=1, kv_transfer_params=_REMOTE_DECODE)
        prefill.resident += 1
        try:
            up = await send(
                prefill.host,
                prefill.port,
                "POST",
                req.path,
                self._headers(req, prefill),
                orjson.dumps(first),
            )
            try:
                answer = b"".join([part async for part in up.body_parts()])
            finally:
                up.close()
        finally:
            prefill.resident -= 1
        entry["prefill_end"] = time.time()
        params = None
        if up.status == 200:
            try:
                params = orjson.loads(answer).get("kv_transfer_params")
            except (orjson.JSONDecodeError, AttributeError):
                params = None
        if not isinstance(params, dict):
            status = up.status if up.status != 200 else 502
            if status == 502:
                answer = (
                    b'{"error":{"message":"prefill engine returned no kv_transfer_params",'
                    b'"type":"BadGateway","param":null,"code":502}}'
                )
            content_type = up.headers.get("content-type", "application/json").encode()
            answer = self._error_body(status, answer)
            resp.send(status, answer, content_type=content_type, headers=self._echo(up))
            entry.update(http_status=status, status="error")
            return None
        return orjson.dumps({**doc, "kv_transfer_params": params})

    async def _stream_back(
        self, up: UpstreamResponse, resp: Responder, entry: dict[str, Any]
    ) -> None:
        entry["http_status"] = up.status
        content_type = up.headers.get("content-type", "application/json")
        if up.status != 200 or not content_type.startswith("text/event-stream"):
            body = b"".join([part async for part in up.body_parts()])
            resp.send(up.status, body, content_type=content_type.encode(), headers=self._echo(up))
            if up.status == 200:
                entry["first_token"] = time.time()
                try:
                    usage = orjson.loads(body).get("usage") or {}
                except (orjson.JSONDecodeError, AttributeError):
                    usage = {}
                entry.update(
                    status="ok",
                    prompt_tokens=usage.get("prompt_tokens"),
                    completion_tokens=usage.get("completion_tokens"),
                )
            return
        resp.start_stream(headers=self._echo(up))
        buf = b""
        chunks = 0
        status = "cut"
        async for part in up.body_parts():
            if resp.closed:
                entry["status"] = "client_disconnected"
                return
            resp.write_chunk(part)
            buf += part
            while (cut := buf.find(b"\n\n")) >= 0:
                event, buf = buf[:cut], buf[cut + 2 :]
                if not event.startswith(b"data: "):
                    continue
                payload = event[6:]
                if payload == b"[DONE]":
                    status = "ok" if status == "cut" else status
                elif payload.startswith(b'{"error"'):
                    status = "stream_error"
                elif b'"choices":[]' in payload:
                    usage = orjson.loads(payload).get("usage") or {}
                    entry.update(
                        prompt_tokens=usage.get("prompt_tokens"),
                        completion_tokens=usage.get("completion_tokens"),
                    )
                else:
                    chunks += 1
                    if entry["first_token"] is None:
                        entry["first_token"] = time.time()
        resp.end_stream()
        if entry["completion_tokens"] is None and chunks:
            entry["completion_tokens"] = chunks
        entry["status"] = status

    @staticmethod
    def _echo(up: Any) -> list[tuple[str, str]]:
        rid = up.headers.get("x-request-id")
        return [("x-request-id", rid)] if rid else []

    def _write(self, entry: dict[str, Any]) -> None:
        if self._journal is not None:
            self._journal.write(orjson.dumps(entry) + b"\n")


def _without_max_model_len(body: bytes) -> bytes:
    """A ModelList whose cards carry no ``max_model_len`` (as OpenAI-style frontends list them)."""
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        return body
    cards = doc.get("data") if isinstance(doc, dict) else None
    for card in cards if isinstance(cards, list) else []:
        if isinstance(card, dict):
            card.pop("max_model_len", None)
    return orjson.dumps(doc)


def _open_append(path: Path) -> int:
    flags = (
        os.O_WRONLY
        | os.O_CREAT
        | os.O_APPEND
        | getattr(os, "O_NOFOLLOW", 0)
        | getattr(os, "O_CLOEXEC", 0)
    )
    return os.open(path, flags, 0o600)
