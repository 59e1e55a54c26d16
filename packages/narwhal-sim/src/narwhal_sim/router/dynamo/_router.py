"""The router standing in for NVIDIA Dynamo 1.6.1's OpenAI frontend (``--router-mimic dynamo``).

The routing policy, the split of decode engines' requests and the journal are the router's own
(``narwhal_sim.router._router``); what the client sees is Dynamo's: its request checks and error
bodies (``_wire``), its chunks (``_relay``), its routes (``/v1/models`` cards with
``context_window``; ``/tokenize``, ``/detokenize``, ``/version``, ``/server_info``... answer 404)
and its ``/metrics`` page (``_metrics``).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import orjson

from narwhal_sim._auth import UNAUTHORIZED, authorized
from narwhal_sim._http import Request, Responder
from narwhal_sim.router._router import Backend, Router
from narwhal_sim.router.dynamo._metrics import UNKNOWN_MODEL, FrontendMetrics, ModelInfo
from narwhal_sim.router.dynamo._relay import DynamoRelay
from narwhal_sim.router.dynamo._wire import (
    NOT_FOUND,
    Refusal,
    check_completion,
    engine_error_body,
    model_card,
    model_list,
    route_not_found,
)

_TEXT = b"text/plain; charset=utf-8"
_LIVE = b'{"status":"live","message":"Service is live"}'


class DynamoRouter(Router):
    """A ``Router`` that answers as Dynamo's frontend; ``context_length`` is the context window
    it reports (0, as with Dynamo's mocker engine, unless given)."""

    def __init__(self, backends: list[Backend], *, context_length: int = 0, **kw: Any) -> None:
        super().__init__(backends, **kw)
        self.context_length = context_length
        self.models = list(dict.fromkeys(b.model for b in backends))
        first = {m: next(b for b in backends if b.model == m) for m in self.models}
        self.metrics = FrontendMetrics(
            {
                m: ModelInfo(
                    context_length=context_length,
                    kv_cache_block_size=b.block_size,
                    max_num_batched_tokens=b.max_num_batched_tokens,
                    max_num_seqs=b.max_num_seqs,
                    total_kv_blocks=b.kv_blocks,
                )
                for m, b in first.items()
            }
        )

    async def handle(self, req: Request, resp: Responder) -> None:
        """Route one client request as Dynamo's frontend does."""
        if not authorized(self.api_key, self._guarded, req):
            resp.send(401, UNAUTHORIZED)
            return
        route = (req.method, req.path)
        if route == ("POST", "/v1/completions"):
            await self._completion(req, resp)
        elif req.path == "/v1/completions":
            resp.send(405, b"", content_type=b"text/plain", headers=[("allow", "POST")])
        elif route == ("GET", "/metrics"):
            resp.send(200, self.metrics.render(), content_type=_TEXT)
        elif route == ("GET", "/v1/models"):
            resp.send(200, model_list(self.models, self.context_length))
        elif req.method == "GET" and req.path.startswith("/v1/models/"):
            model = req.path.removeprefix("/v1/models/")
            if model in self.models:
                resp.send(200, orjson.dumps(model_card(model, self.context_length)))
            else:
                resp.send(404, Refusal(404, "Model not found", NOT_FOUND).body())
        elif route == ("GET", "/health"):
            resp.send(200, self._health())
        elif route == ("GET", "/live"):
            resp.send(200, _LIVE)
        else:
            refusal = route_not_found(req.method, req.path)
            self.metrics.fail(refusal.failure)
            resp.send(refusal.status, refusal.body())

    def _health(self) -> bytes:
        instances = [
            {
                "component": "backend",
                "endpoint": "generate",
                "namespace": "dynamo",
                "instance_id": k,
                "transport": {"tcp": f"{b.host}:{b.port}/{b.iid}/dynamo/backend/generate"},
                "device_type": "cuda",
                "request_plane_codec": "msgpack",
            }
            for k, b in enumerate(self.backends)
        ]
        return orjson.dumps(
            {
                "status": "healthy",
                "endpoints": ["dyn://dynamo.backend.generate"],
                "instances": instances,
            }
        )

    def _error_body(self, status: int, body: bytes) -> bytes:
        return engine_error_body(status, body)

    def _refuse(self, req: Request, resp: Responder, refusal: Refusal, status: str) -> None:
        self.metrics.fail(refusal.failure)
        resp.send(refusal.status, refusal.body())
        entry = self._journal_entry(req, {}, time.time())
        entry.update(end=time.time(), http_status=refusal.status, status=status)
        self._write(entry)

    async def _completion(self, req: Request, resp: Responder) -> None:
        try:
            ask = check_completion(req.body)
        except Refusal as refusal:
            self._refuse(req, resp, refusal, "error")
            return
        kind = ask.request_type
        if ask.model not in self.models:
            self.metrics.start(UNKNOWN_MODEL, kind)
            self.metrics.end(UNKNOWN_MODEL, kind, "error", "not_found")
            self._refuse(req, resp, Refusal(404, "Model not found", NOT_FOUND), "no_engine")
            return
        self.metrics.start(ask.model, kind)
        self.metrics.inflight[ask.model] += 1
        relay = DynamoRelay(ask, req, self.metrics)
        entry: dict[str, Any] = {"status": "error"}
        try:
            entry = await self._route_completion(
                req, resp, ask.engine_doc, orjson.dumps(ask.engine_doc), relay
            )
        finally:
            relay.leave_queue()
            self.metrics.inflight[ask.model] -= 1
            ok = entry.get("status") == "ok"
            relay.observe_end(asyncio.get_running_loop().time() - req.received, ok)
            if ok:
                self.metrics.end(ask.model, kind, "success")
            elif entry.get("status") == "client_disconnected":
                self.metrics.end(ask.model, kind, "error", "cancelled")
            else:
                self.metrics.end(ask.model, kind, "error", "internal")
