"""One simulated vLLM engine: routes, auth, faults, metrics, and its scheduler."""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from typing import Any

import orjson

from narwhal_sim._auth import GUARDED, UNAUTHORIZED, authorized, env_key
from narwhal_sim._errors import SimConfigError
from narwhal_sim._faults import Faults
from narwhal_sim._http import HttpServer, Request, Responder
from narwhal_sim.engine._activity import Activity
from narwhal_sim.engine._bodies import completion_body
from narwhal_sim.engine._completions import ApiError, CompletionParams, parse_completion
from narwhal_sim.engine._info import detokenize_reply, model_list, server_info_reply, tokenize_reply
from narwhal_sim.engine._metrics import EngineStats, cache_config_labels, render_engine_metrics
from narwhal_sim.engine._spans import NO_TRACING_STATE, tracer_for
from narwhal_sim.engine._stream import StreamWriter
from narwhal_sim.model._config import EngineSettings, is_loopback
from narwhal_sim.model._scheduler import Device, EngineScheduler, SimRequest, StepObserver
from narwhal_sim.model._timings import request_timings

_TEXT = b"text/plain; version=0.0.4; charset=utf-8"
_NOT_FOUND = b'{"detail":"Not Found"}'


class _Collector:
    """TokenSink of a non-streaming request."""

    def __init__(self) -> None:
        self.done: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    def on_tokens(self, request: SimRequest, count: int, finished: bool) -> None:
        if finished and not self.done.done():
            self.done.set_result("ok")

    def on_abort(self, request: SimRequest) -> None:
        if not self.done.done():
            self.done.set_result("cut")


class SimEngine:
    """A vLLM-compatible engine on one port, scheduled on a shared ``Device``."""

    def __init__(self, settings: EngineSettings, device: Device, *, seed: int) -> None:
        self.settings = settings
        self.faults: Faults = settings.faults
        self.device = device
        self._rng = random.Random(f"{seed}:{settings.iid}:http")
        self.api_key = env_key(settings.api_key_env)
        self.start_time = time.time()
        self.stats = EngineStats()
        self.activity = Activity()
        self.scheduler = EngineScheduler(
            preset=settings.preset,
            max_num_seqs=settings.max_num_seqs,
            max_num_batched_tokens=settings.max_num_batched_tokens,
            kv_cache_tokens=settings.kv_cache_tokens,
            block_size=settings.block_size,
            observer=StepObserver(self._on_first_token, self._on_gap, self._on_finish),
            stalled=settings.faults.stall,
            mode=settings.scheduler,
        )
        device.attach(self.scheduler)
        self.server = HttpServer(self.handle, keep_alive_s=settings.keep_alive_s)
        self.server.drop_idle_after_s = self.faults.drop_idle_after_s
        self.tracer = tracer_for(settings)  # None: no otlp_traces_endpoint

    # lifecycle -------------------------------------------------------------------------------
    async def start(self) -> None:
        """Listen on the engine's address."""
        await self.server.start(self.settings.host, self.settings.port)
        if self.tracer is not None:
            self.tracer.exporter.start()

    async def stop(self) -> None:
        """Cut everything and close the socket."""
        self.scheduler.abort_all()
        await self.server.stop()
        if self.tracer is not None:
            await self.tracer.exporter.stop()  # one bounded flush of the queued spans

    def restart(self) -> None:
        """A new process: in-flight requests cut, new metrics and ``process_start_time_seconds``."""
        self.scheduler.abort_all()
        self.stats = EngineStats()
        self.start_time = max(time.time(), self.start_time + 0.001)

    def set_faults(self, patch: dict[str, Any]) -> None:
        """Merge a JSON patch into the active faults (``null`` clears a fault)."""
        self.faults = self.faults.merged(patch)
        self.scheduler.stalled = self.faults.stall
        self.server.drop_idle_after_s = self.faults.drop_idle_after_s
        if self.tracer is not None and "span_drop_every" in patch:
            self.tracer.restart_drop_count()
        self.device.wake()

    def state(self) -> dict[str, Any]:
        """Scheduler state for ``GET /_sim/state``."""
        s = self.settings
        sch = self.scheduler
        return {
            "iid": s.iid,
            "role": s.role,
            "group": s.group,
            "model": s.served_model_name,
            "preset": s.preset.name,
            "api_style": s.api_style,
            "version": self._version(),
            "max_model_len": s.max_model_len,
            "max_num_seqs": s.max_num_seqs,
            "max_num_batched_tokens": s.max_num_batched_tokens,
            "scheduler": s.scheduler,
            "kv_cache_tokens": s.kv_cache_tokens,
            "running": len(sch.running),
            "waiting": len(sch.waiting),
            "kv_reserved_tokens": sch.kv_reserved,
            "kv_used_tokens": sch.kv_used_tokens(),
            "device_steps": self.device.steps,
            "device_busy_s": self.device.busy_s,
            "device_max_engines_per_step": self.device.max_engines_per_step,
            **self.activity.summary(asyncio.get_running_loop().time()),
            "process_start_time_seconds": self.start_time,
            "time_scale": self.device.time_scale,
            "slowdown": self.device.slowdown,
            "faults": self.faults.to_dict(),
            "connections": {
                "accepted": self.server.accepted,
                "open": len(self.server.connections),
                "keep_alive_s": self.server.keep_alive_s,
                "idle_closes": self.server.idle_closes,
                "idle_drops": self.server.idle_drops,
            },
            "otlp": self.tracer.state() if self.tracer is not None else dict(NO_TRACING_STATE),
        }

    # observer (simulated seconds) --------------------------------------------------------------
    def _on_first_token(self, r: SimRequest, ttft: float) -> None:
        self.stats.ttft.observe(ttft)
        self.stats.prompt_tokens += r.prompt_len
        self.stats.generation_tokens += 1

    def _on_gap(self, gap: float, tokens: int) -> None:
        self.stats.itl.observe(gap)
        self.stats.generation_tokens += tokens

    def _on_finish(self, r: SimRequest, e2e: float) -> None:
        # one computation for the histograms and the span (its e2e_s is the scheduler's e2e)
        timings = request_timings(r, self.device.time_scale)
        self.stats.observe_finished(timings)
        if self.tracer is not None:
            now = asyncio.get_running_loop().time()
            self.tracer.finished(r, timings, self.faults.span_drop_every, now)

    # HTTP --------------------------------------------------------------------------------------
    def _version(self) -> str:
        return self.faults.version or self.settings.version

    def _error(
        self, resp: Responder, err: ApiError, headers: list[tuple[str, str]] | None = None
    ) -> None:
        resp.send(err.status, err.body(self.settings.error_shape), headers=headers)

    async def handle(self, req: Request, resp: Responder) -> None:
        """Route one request."""
        path, method = req.path, req.method
        if not authorized(self.api_key, GUARDED[self.settings.api_style], req):
            resp.send(401, UNAUTHORIZED)
            return
        route = _ROUTES.get(path)
        if path in _DEV_ROUTES and not self.settings.dev_mode:
            route = None  # vLLM registers them only with VLLM_SERVER_DEV_MODE=1
        if route is None:
            if path.startswith("/_sim/"):
                await self._control(req, resp)
                return
            resp.send(404, _NOT_FOUND)
            return
        want, name = route
        if method != want:
            resp.send(405, b'{"detail":"Method Not Allowed"}')
            return
        try:
            if want == "POST":
                if not req.headers.get("content-type", "").lower().startswith("application/json"):
                    raise ApiError(
                        400, "Unsupported Media Type: Only 'application/json' is allowed"
                    )
                try:
                    body = orjson.loads(req.body)
                except orjson.JSONDecodeError as exc:
                    raise ApiError(400, f"JSON decode error: {exc}", "Bad Request") from exc
            else:
                body = None
            await getattr(self, name)(req, resp, body)
        except ApiError as err:
            self._error(resp, err)

    async def _health(self, req: Request, resp: Responder, body: Any) -> None:
        resp.send(self.faults.health_status or 200, b"")

    async def _version_route(self, req: Request, resp: Responder, body: Any) -> None:
        resp.send(200, orjson.dumps({"version": self._version()}))

    def _max_model_len(self, fault: int | str | None) -> int | None:
        if fault == "missing":
            return None
        return fault if isinstance(fault, int) else self.settings.max_model_len

    async def _models(self, req: Request, resp: Responder, body: Any) -> None:
        limit = self._max_model_len(self.faults.models_max_model_len)
        resp.send(200, model_list(self.settings, limit))

    async def _tokenize(self, req: Request, resp: Responder, body: Any) -> None:
        limit = self._max_model_len(self.faults.tokenize_max_model_len)
        resp.send(200, tokenize_reply(self.settings, body, limit))

    async def _detokenize(self, req: Request, resp: Responder, body: Any) -> None:
        resp.send(200, detokenize_reply(self.settings, body))

    async def _server_info(self, req: Request, resp: Responder, body: Any) -> None:
        resp.send(200, server_info_reply(self.settings, req.query, self._prefix_caching()))

    def _prefix_caching(self) -> bool:
        fault = self.faults.prefix_caching
        return fault if fault is not None else self.settings.prefix_caching

    async def _metrics(self, req: Request, resp: Responder, body: Any) -> None:
        s, sch = self.settings, self.scheduler
        blocks = s.kv_cache_tokens // s.block_size
        labels = cache_config_labels(
            api_style=s.api_style,
            block_size=s.block_size,
            num_gpu_blocks=blocks,
            prefix_caching=self._prefix_caching(),
            gpu_memory_utilization=s.gpu_memory_utilization,
            kv_cache_tokens=s.kv_cache_tokens,
            max_model_len=s.max_model_len,
        )
        text = render_engine_metrics(
            model_name=s.served_model_name,
            engine_index="0",
            running=len(sch.running),
            waiting=len(sch.waiting),
            kv_usage=min(1.0, sch.kv_used_tokens() / max(1, s.kv_cache_tokens)),
            cache_config=labels,
            start_time=self.start_time,
            stats=self.stats,
        )
        resp.send(200, text, content_type=_TEXT)

    async def _completions(self, req: Request, resp: Responder, body: Any) -> None:
        s = self.settings
        header_rid = req.headers.get("x-request-id")
        echo = (
            [("x-request-id", header_rid or uuid.uuid4().hex)]
            if s.enable_request_id_headers
            else []
        )
        fault = self.faults.http_error
        if fault is not None and self._rng.random() < fault.rate:
            kind = {
                429: "TooManyRequestsError",
                500: "InternalServerError",
                503: "ServiceUnavailableError",
            }
            err = ApiError(
                fault.status, "simulated failure (narwhal-sim http_error fault)", kind[fault.status]
            )
            self._error(resp, err, echo)
            return
        try:
            params = parse_completion(s, body, header_rid)
        except ApiError as err:
            self._error(resp, err, echo)
            return
        if not self.scheduler.fits_ever(len(params.prompt_ids), params.target_tokens):
            self._error(
                resp, ApiError(400, "request needs more KV cache than the engine has"), echo
            )
            return
        created = int(time.time())
        loop = asyncio.get_running_loop()
        now = min(req.received, loop.time())
        delay = s.preset.api_overhead
        if params.remote_prefill:  # the prompt's KV comes from the prefill engine
            delay += s.kv_transfer_s_per_token * len(params.prompt_ids)
        ready = now + self.device.off_gpu_s(delay)
        sink: StreamWriter | _Collector
        if params.stream:
            resp.start_stream(headers=echo)
            sink = StreamWriter(
                s,
                params,
                resp,
                created,
                cut_after=self.faults.cut_after_tokens,
                error_after=self.faults.stream_error_after_tokens,
                usage_excess=self.faults.usage_excess_tokens or 0,
                on_cut=self._drop,
            )
        else:
            sink = _Collector()
        request = SimRequest(
            params.request_id, len(params.prompt_ids), params.target_tokens, sink, now, ready
        )
        if params.remote_prefill:  # as vLLM: only the last prompt token is computed again
            request.computed = request.prompt_len - 1
        resp.on_close(lambda: self._drop(request))
        self.activity.begin(now)
        if self.tracer is not None:
            self.tracer.track(request, params)
        self.scheduler.submit(request)
        try:
            outcome = await sink.done
        finally:
            self.activity.end(loop.time())
            if self.tracer is not None:
                self.tracer.forget(request)
        self._count(params, outcome)
        if params.stream:
            return  # the writer has ended (or cut) the stream
        if outcome == "ok":
            resp.send(200, completion_body(s, params, created), headers=echo)
        else:
            resp.abort()

    def _count(self, params: CompletionParams, outcome: str) -> None:
        reason = params.finish_reason if outcome == "ok" else "abort"
        self.stats.success[reason] = self.stats.success.get(reason, 0) + 1

    def _drop(self, request: SimRequest) -> None:
        self.scheduler.abort(request)
        sink = request.sink
        if isinstance(sink, _Collector | StreamWriter) and not sink.done.done():
            sink.done.set_result("cut")

    async def _control(self, req: Request, resp: Responder) -> None:
        if not is_loopback(req.peer.removeprefix("::ffff:")):
            resp.send(
                403, b'{"detail":"narwhal-sim control endpoints answer loopback clients only"}'
            )
            return
        if req.path == "/_sim/state" and req.method == "GET":
            resp.send(200, orjson.dumps(self.state()))
        elif req.path == "/_sim/activity" and req.method == "GET":
            resp.send(200, orjson.dumps({"idle_gaps": self.activity.gap_list()}))
        elif req.path == "/_sim/faults" and req.method == "POST":
            try:
                patch = orjson.loads(req.body or b"{}")
                if not isinstance(patch, dict):
                    raise SimConfigError("expected a JSON object of faults")
                self.set_faults(patch)
            except (orjson.JSONDecodeError, SimConfigError) as exc:
                resp.send(400, orjson.dumps({"detail": str(exc)}))
                return
            resp.send(200, orjson.dumps({"faults": self.faults.to_dict()}))
        elif req.path == "/_sim/restart" and req.method == "POST":
            self.restart()
            resp.send(200, orjson.dumps({"process_start_time_seconds": self.start_time}))
        else:
            resp.send(404, _NOT_FOUND)


_ROUTES: dict[str, tuple[str, str]] = {
    "/health": ("GET", "_health"),
    "/ping": ("GET", "_health"),
    "/version": ("GET", "_version_route"),
    "/v1/models": ("GET", "_models"),
    "/tokenize": ("POST", "_tokenize"),
    "/detokenize": ("POST", "_detokenize"),
    "/metrics": ("GET", "_metrics"),
    "/server_info": ("GET", "_server_info"),
    "/v1/completions": ("POST", "_completions"),
}
_DEV_ROUTES = frozenset({"/server_info"})
