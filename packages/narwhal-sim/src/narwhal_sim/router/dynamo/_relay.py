"""One completion's answer as Dynamo's frontend gives it, made from the engine's stream.

The engine always streams (with cumulative usage on every chunk); the relay counts the tokens,
cuts each engine chunk into one chunk per token (``"usage":null``, or the cumulative usage with
``continuous_usage_stats``), holds the finish reason back for an extra empty chunk, and ends with
the usage chunk (``include_usage``) and ``[DONE]``; a unary request gets the whole answer at the
end, without ``logprobs`` or ``token_ids``. It keeps the frontend's metrics as it goes.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import orjson

from narwhal_sim._http import Request, Responder
from narwhal_sim._upstream import UpstreamResponse
from narwhal_sim.router.dynamo._metrics import FrontendMetrics
from narwhal_sim.router.dynamo._wire import (
    CompletionAsk,
    Head,
    engine_error_body,
    split_tokens,
    usage,
)

_DONE = b"data: [DONE]\n\n"
_STREAM_ERROR = (500, b'{"error":{"message":"the engine stream failed"}}')


class DynamoRelay:
    """A ``Relay`` for one accepted completion (``ask``); ``queued`` until the first answer."""

    def __init__(self, ask: CompletionAsk, req: Request, metrics: FrontendMetrics) -> None:
        self._ask = ask
        self._metrics = metrics
        self._received = req.received
        rid = req.headers.get("x-request-id")
        self._echo = [("x-request-id", rid)] if rid else []
        self._head = Head(f"cmpl-{uuid.uuid4()}", int(time.time()), ask.model)
        self._prompt = 0
        self._tokens = 0
        self._texts: list[str] = []
        self._finish: str | None = None
        self._last_token: float | None = None
        self.queued = True
        metrics.queued[ask.model] += 1

    def leave_queue(self) -> None:
        """The first answer came (or the request ended without one)."""
        if self.queued:
            self.queued = False
            self._metrics.queued[self._ask.model] -= 1

    async def __call__(self, up: UpstreamResponse, resp: Responder, entry: dict[str, Any]) -> None:
        entry["http_status"] = up.status
        if up.status != 200 or not up.headers.get("content-type", "").startswith(
            "text/event-stream"
        ):
            body = b"".join([part async for part in up.body_parts()])
            self.leave_queue()
            code = up.status if up.status != 200 else 502
            resp.send(code, engine_error_body(code, body), headers=self._echo)
            entry.update(http_status=code, status="error")
            return
        if self._ask.stream:
            head = [("cache-control", "no-cache"), *self._echo]
            resp.start_stream(content_type=b"text/event-stream", headers=head)
        status = await self._pump(up, resp, entry)
        entry.update(prompt_tokens=self._prompt, completion_tokens=self._tokens, status=status)
        if status == "client_disconnected":
            self._metrics.disconnected += 1
        elif status == "ok":
            self._answer(resp)
        elif status == "stream_error" and self._ask.stream:
            resp.end_stream(_DONE)
        elif status == "stream_error":
            resp.send(_STREAM_ERROR[0], engine_error_body(*_STREAM_ERROR), headers=self._echo)
        else:
            resp.abort()

    async def _pump(self, up: UpstreamResponse, resp: Responder, entry: dict[str, Any]) -> str:
        """Relay the engine's events; the outcome (``ok``, ``stream_error``, ``cut``...)."""
        buf = b""
        status = "cut"
        async for part in up.body_parts():
            if resp.closed:
                return "client_disconnected"
            buf += part
            out: list[bytes] = []
            while (cut := buf.find(b"\n\n")) >= 0:
                event, buf = buf[:cut], buf[cut + 2 :]
                if not event.startswith(b"data: "):
                    continue
                payload = event[6:]
                if payload == b"[DONE]":
                    status = "ok" if status == "cut" else status
                elif payload.startswith(b'{"error"'):
                    status = "stream_error"
                    out.append(event + b"\n\n")
                else:
                    out += self._content(orjson.loads(payload), entry)
            if out and self._ask.stream:
                resp.write_chunk(b"".join(out))
        return status

    def _usage(self, every_chunk: bool) -> dict[str, Any] | None:
        wanted = self._ask.continuous_usage if every_chunk else self._ask.include_usage
        return usage(self._prompt, self._tokens) if wanted else None

    def _content(self, doc: dict[str, Any], entry: dict[str, Any]) -> list[bytes]:
        """The client's chunks for one engine chunk (none for a unary request)."""
        got = doc.get("usage") or {}
        self._prompt = int(got.get("prompt_tokens", self._prompt))
        choices = doc.get("choices") or []
        if not choices:
            return []
        choice = choices[0]
        text = str(choice.get("text") or "")
        total = got.get("completion_tokens")
        count = total - self._tokens if isinstance(total, int) else int(bool(text))
        out: list[bytes] = []
        for piece, n in split_tokens(text, count):
            self._token(n, entry)
            if self._ask.stream:
                out.append(self._head.chunk([{"text": piece, "index": 0}], self._usage(True)))
            else:
                self._texts.append(piece)
        finish = choice.get("finish_reason")
        if isinstance(finish, str):
            self._finish = finish
            if self._ask.stream:
                last = {"text": "", "index": 0, "finish_reason": finish}
                out.append(self._head.chunk([last], self._usage(True)))
        return out

    def _token(self, n: int, entry: dict[str, Any]) -> None:
        """``n`` tokens reach the client now: TTFT or the gaps, the output counter."""
        now = asyncio.get_running_loop().time()
        model = self._ask.model
        if self._last_token is None:
            self.leave_queue()
            entry["first_token"] = time.time()
            self._metrics.observe("time_to_first_token_seconds", model, now - self._received)
        else:
            self._metrics.observe("inter_token_latency_seconds", model, now - self._last_token)
        for _ in range(n - 1):
            self._metrics.observe("inter_token_latency_seconds", model, 0.0)
        self._last_token = now
        self._tokens += n
        self._metrics.output_tokens[model] += n

    def _answer(self, resp: Responder) -> None:
        """The end of a stream that went well, or a unary request's whole answer."""
        if self._ask.stream:
            tail = self._head.chunk([], self._usage(False)) if self._ask.include_usage else b""
            resp.end_stream(tail + _DONE)
            return
        choice = {"text": "".join(self._texts), "index": 0, "finish_reason": self._finish}
        doc = self._head.document([choice], usage(self._prompt, self._tokens))
        resp.send(200, orjson.dumps(doc), headers=self._echo)

    def observe_end(self, duration_s: float, ok: bool) -> None:
        """The request's duration, and (when it went well) its sequence lengths."""
        model = self._ask.model
        self._metrics.observe("request_duration_seconds", model, duration_s)
        if ok:
            self._metrics.observe("input_sequence_tokens", model, self._prompt)
            self._metrics.observe("output_sequence_tokens", model, self._tokens)
