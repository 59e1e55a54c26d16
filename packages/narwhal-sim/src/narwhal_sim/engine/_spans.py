"""vLLM's per-request trace span (``llm_request``) and its batched OTLP/HTTP export.

vLLM v1's output processor (``do_tracing``, with ``--otlp-traces-endpoint``) makes one SERVER
span per finished request, from its arrival to its end, with the request's latencies as
attributes; OpenTelemetry's BatchSpanProcessor exports the spans in batches from a background
thread. Here a finishing request only appends its span to a list (``RequestTracer.finished``);
a background task posts the list every ``interval_s`` and once more when the engine stops. An
export that fails (nothing listening, a refusal, a non-2xx answer, a timeout) is counted and its
batch dropped, never retried and never seen by the request path.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from typing import Any

from narwhal_sim._upstream import UpstreamError, send
from narwhal_sim.engine._completions import CompletionParams
from narwhal_sim.engine._otlp import (
    SPAN_KIND_SERVER,
    AttrValue,
    OtlpSpan,
    encode_export_request,
)
from narwhal_sim.model._config import EngineSettings, parse_http_endpoint
from narwhal_sim.model._scheduler import SimRequest
from narwhal_sim.model._timings import RequestTimings

SCOPE_NAME = "vllm.llm_engine"  # vLLM's init_tracer("vllm.llm_engine", ...)
SERVICE_NAME = "vllm.llm_engine"
MAX_QUEUE_SPANS = 2048  # BatchSpanProcessor's max_queue_size: more waiting spans are dropped
MAX_BATCH_SPANS = 512  # and its max_export_batch_size
EXPORT_TIMEOUT_S = 2.0  # one POST, connect to answer
FLUSH_TIMEOUT_S = 1.0  # the final flush when the engine stops


def request_span(
    request_id: str, t: RequestTimings, params: CompletionParams, start_ns: int, end_ns: int
) -> OtlpSpan:
    """The ``llm_request`` span of one finished request, attribute for attribute as vLLM's
    output processor sets them (``top_p``, ``max_tokens``, ``temperature`` only when truthy:
    a greedy request, temperature 0, has no temperature attribute, as in vLLM)."""
    attrs: list[tuple[str, AttrValue]] = [
        ("gen_ai.latency.time_to_first_token", t.ttft_s),
        ("gen_ai.latency.e2e", t.e2e_s),
        ("gen_ai.latency.time_in_queue", t.queue_s),
        ("gen_ai.usage.prompt_tokens", t.prompt_tokens),
        ("gen_ai.usage.completion_tokens", t.completion_tokens),
        ("gen_ai.latency.time_in_model_prefill", t.prefill_s),
        ("gen_ai.latency.time_in_model_decode", t.decode_s),
        ("gen_ai.latency.time_in_model_inference", t.inference_s),
        ("gen_ai.request.id", request_id),
    ]
    if params.top_p:
        attrs.append(("gen_ai.request.top_p", float(params.top_p)))
    if params.max_tokens:
        attrs.append(("gen_ai.request.max_tokens", params.max_tokens))
    if params.temperature:
        attrs.append(("gen_ai.request.temperature", float(params.temperature)))
    attrs.append(("gen_ai.request.n", 1))
    return OtlpSpan(
        trace_id=os.urandom(16),
        span_id=os.urandom(8),
        name="llm_request",
        kind=SPAN_KIND_SERVER,
        start_time_unix_nano=start_ns,
        end_time_unix_nano=end_ns,
        attributes=tuple(attrs),
    )


class SpanExporter:
    """Queued spans posted as OTLP/HTTP protobuf to one endpoint by a background task."""

    def __init__(self, endpoint: str, *, instance_id: str, interval_s: float) -> None:
        self.endpoint = endpoint
        self.host, self.port, self.path = parse_http_endpoint(endpoint)
        self.interval_s = interval_s
        self._resource: tuple[tuple[str, AttrValue], ...] = (
            ("service.name", SERVICE_NAME),
            ("service.instance.id", instance_id),
        )
        self._queue: list[OtlpSpan] = []
        self._task: asyncio.Task[None] | None = None
        self.exported_spans = 0
        self.failed_exports = 0  # POSTs that failed (their spans are dropped)
        self.dropped_spans = 0  # spans of failed POSTs, of a full queue, left at stop
        self.last_error: str | None = None

    def add(self, span: OtlpSpan) -> None:
        """Queue one span (synchronous, no I/O)."""
        if len(self._queue) >= MAX_QUEUE_SPANS:
            self.dropped_spans += 1
        else:
            self._queue.append(span)

    @property
    def queued_spans(self) -> int:
        """Spans waiting for the next export."""
        return len(self._queue)

    def start(self) -> None:
        """Start the export task (on the running loop)."""
        self._task = asyncio.get_running_loop().create_task(self._run(), name="otlp-export")

    async def stop(self) -> None:
        """Stop the task, then export what is queued once, within ``FLUSH_TIMEOUT_S``."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(FLUSH_TIMEOUT_S):
                await self.export_queued()
        self.dropped_spans += len(self._queue)
        self._queue.clear()

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            await self.export_queued()

    async def export_queued(self) -> None:
        """Post every queued span, ``MAX_BATCH_SPANS`` a request."""
        while self._queue:
            batch = self._queue[:MAX_BATCH_SPANS]
            del self._queue[:MAX_BATCH_SPANS]
            await self._export(batch)

    async def _export(self, batch: list[OtlpSpan]) -> None:
        body = encode_export_request(self._resource, SCOPE_NAME, batch)
        try:
            async with asyncio.timeout(EXPORT_TIMEOUT_S):
                status = await self._post(body)
        except asyncio.CancelledError:
            self.dropped_spans += len(batch)
            raise
        except (TimeoutError, UpstreamError, OSError) as exc:
            self._failed(batch, "timed out" if isinstance(exc, TimeoutError) else str(exc))
            return
        if 200 <= status < 300:
            self.exported_spans += len(batch)
        else:
            self._failed(batch, f"HTTP {status}")

    async def _post(self, body: bytes) -> int:
        headers = [("content-type", "application/x-protobuf")]
        response = await send(self.host, self.port, "POST", self.path, headers, body)
        try:
            async for _ in response.body_parts():
                pass
        finally:
            response.close()
        return response.status

    def _failed(self, batch: list[OtlpSpan], error: str) -> None:
        self.failed_exports += 1
        self.dropped_spans += len(batch)
        self.last_error = error


class RequestTracer:
    """One engine's tracing: which requests it serves, their spans, the ``span_drop_every``
    fault, and the exporter."""

    def __init__(self, exporter: SpanExporter) -> None:
        self.exporter = exporter
        self._params: dict[SimRequest, CompletionParams] = {}
        self._finished = 0  # requests finished since span_drop_every was last set
        self.skipped_spans = 0  # requests span_drop_every left untraced

    def track(self, request: SimRequest, params: CompletionParams) -> None:
        """Remember what ``request`` asked for (until ``forget``)."""
        self._params[request] = params

    def forget(self, request: SimRequest) -> None:
        """The request's handler is done."""
        self._params.pop(request, None)

    def restart_drop_count(self) -> None:
        """``span_drop_every`` was set: count finished requests from here."""
        self._finished = 0

    def finished(
        self, request: SimRequest, timings: RequestTimings, drop_every: int | None, loop_now: float
    ) -> None:
        """A tracked request finished normally at loop time ``loop_now``: queue its span, unless
        it is the ``drop_every``-th one."""
        params = self._params.get(request)
        if params is None or request.last_token_at is None:
            return
        self._finished += 1
        if drop_every is not None and self._finished % drop_every == 0:
            self.skipped_spans += 1
            return
        wall_ns = time.time_ns()

        def unix_ns(loop_t: float) -> int:
            return wall_ns + round((loop_t - loop_now) * 1e9)

        span = request_span(
            f"{params.request_id}-0",  # vLLM names prompt 0 of a completion so
            timings,
            params,
            unix_ns(request.arrival),
            unix_ns(request.last_token_at),
        )
        self.exporter.add(span)

    def state(self) -> dict[str, Any]:
        """The ``otlp`` part of ``GET /_sim/state``."""
        e = self.exporter
        return {
            "endpoint": e.endpoint,
            "export_interval_s": e.interval_s,
            "queued_spans": e.queued_spans,
            "exported_spans": e.exported_spans,
            "failed_exports": e.failed_exports,
            "dropped_spans": e.dropped_spans,
            "skipped_spans": self.skipped_spans,
            "last_error": e.last_error,
        }


def tracer_for(settings: EngineSettings) -> RequestTracer | None:
    """The tracer of an engine with ``otlp_traces_endpoint`` (its exporter not yet started)."""
    if settings.otlp_traces_endpoint is None:
        return None
    exporter = SpanExporter(
        settings.otlp_traces_endpoint,
        instance_id=settings.iid,
        interval_s=settings.otlp_export_interval_s,
    )
    return RequestTracer(exporter)


#: ``GET /_sim/state``'s ``otlp`` of an engine without ``otlp_traces_endpoint``.
NO_TRACING_STATE: dict[str, Any] = {
    "endpoint": None,
    "export_interval_s": None,
    "queued_spans": 0,
    "exported_spans": 0,
    "failed_exports": 0,
    "dropped_spans": 0,
    "skipped_spans": 0,
    "last_error": None,
}
