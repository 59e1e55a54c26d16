"""SSE framing of a streamed completion: one writer per request, fed by the scheduler."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import orjson

from narwhal_sim import _tokenizer as tok
from narwhal_sim._http import Responder
from narwhal_sim.engine._bodies import fingerprint, logprobs_obj
from narwhal_sim.engine._completions import ApiError, CompletionParams
from narwhal_sim.model._config import EngineSettings
from narwhal_sim.model._scheduler import SimRequest

DONE = b"data: [DONE]\n\n"


class StreamWriter:
    """Turns scheduler progress into SSE chunks on one response (a ``TokenSink``)."""

    def __init__(
        self,
        settings: EngineSettings,
        params: CompletionParams,
        responder: Responder,
        created: int,
        *,
        cut_after: int | None,
        error_after: int | None,
        on_cut: Callable[[SimRequest], None],
        usage_excess: int = 0,
    ) -> None:
        self._p = params
        self._resp = responder
        self._cut_after = cut_after
        self._error_after = error_after
        self._on_cut = on_cut
        self._usage_excess = usage_excess
        self._coalesce_steps = settings.coalesce_steps
        self._merge = settings.coalesce_mode == "merge"
        self._style33 = settings.api_style == "0.33"
        self._fingerprint_field = (
            b',"system_fingerprint":"%s"' % fingerprint(settings).encode() if self._style33 else b""
        )
        head = orjson.dumps(
            {
                "id": params.request_id,
                "object": "text_completion",
                "created": created,
                "model": settings.served_model_name,
            }
        )
        self._head = b"data: " + head[:-1] + b',"choices":[{"index":0,"text":'
        self._usage_head = b"data: " + head[:-1] + b',"choices":[],"usage":'
        # 0.10.2/0.11.0 bug: prompt_token_ids on the first chunk even without return_token_ids
        self._prompt_ids_first = params.return_token_ids or not self._style33
        self._emitted = 0  # tokens written
        self._pending = 0  # tokens generated but held back by stream_interval
        self._outputs: list[int] = []  # outputs (token counts) the API server has not written yet
        self._steps = 0  # engine steps since the API server last wrote
        self._chars = 0
        self.done: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    # TokenSink -----------------------------------------------------------------------------
    def on_tokens(self, request: SimRequest, count: int, finished: bool) -> None:
        """One engine step's tokens. The engine makes an output at the first token, every
        ``stream_interval`` tokens and at the last; the API server writes its outputs at once,
        or (coalescing) every ``coalesce_steps`` steps, the first and the last output at once."""
        self._pending += count
        first = self._emitted == 0 and not self._outputs
        limit = self._cut_after if self._cut_after is not None else self._error_after
        if limit is not None and self._emitted + sum(self._outputs) + self._pending >= limit:
            self._outputs, self._pending = [], limit - self._emitted
            if self._pending > 0:
                self._resp.write_chunk(self._chunk(self._pending, None))
            self._fault(request)
            return
        if finished or first or self._pending >= self._p.stream_interval:
            self._outputs.append(self._pending)
            self._pending = 0
        self._steps += 1
        if not (finished or first or self._steps >= self._coalesce_steps) or not self._outputs:
            return
        outputs, self._outputs, self._steps = self._outputs, [], 0
        if self._merge:
            outputs = [sum(outputs)]
        data = b"".join(
            self._chunk(n, self._p.finish_reason if finished and i == len(outputs) - 1 else None)
            for i, n in enumerate(outputs)
        )
        if not finished:
            self._resp.write_chunk(data)
            return
        if self._p.include_usage:
            data += self._usage_chunk()
        self._resp.end_stream(data + DONE)
        if not self.done.done():
            self.done.set_result("ok")

    def on_abort(self, request: SimRequest) -> None:
        """The engine restarted: drop the connection mid-stream."""
        self._resp.abort()
        if not self.done.done():
            self.done.set_result("cut")

    # ---------------------------------------------------------------------------------------
    def _fault(self, request: SimRequest) -> None:
        outcome = "cut" if self._cut_after is not None else "stream_error"
        if not self.done.done():
            self.done.set_result(outcome)
        self._on_cut(request)
        if self._cut_after is not None:
            self._resp.abort()
        else:
            err = ApiError(500, "Internal server error", "InternalServerError")
            self._resp.end_stream(err.stream_event() + DONE)

    def _chunk(self, count: int, finish: str | None) -> bytes:
        """The SSE event of the next ``count`` tokens (counted as written)."""
        p = self._p
        start = self._emitted
        first = start == 0
        self._emitted += count
        ids = [tok.generated_id(p.digest, start + k) for k in range(count)]
        texts = [tok.token_text(i) for i in ids]
        text = "".join(texts)
        parts = [self._head, orjson.dumps(text), b',"logprobs":']
        if p.logprobs is not None:
            parts.append(
                orjson.dumps(logprobs_obj(ids, texts, self._chars, p.logprobs, p.tokens_as_ids))
            )
        else:
            parts.append(b"null")
        self._chars += len(text)
        parts.append(b',"finish_reason":' + (b'"%s"' % finish.encode() if finish else b"null"))
        parts.append(b',"stop_reason":null,"prompt_token_ids":')
        parts.append(orjson.dumps(p.prompt_ids) if first and self._prompt_ids_first else b"null")
        parts.append(b',"token_ids":' + (orjson.dumps(ids) if p.return_token_ids else b"null"))
        usage = _usage(len(p.prompt_ids), start + count) if p.continuous_usage else b"null"
        if self._style33:
            parts.append(b',"weight_versions":null}]')
            if p.continuous_usage:
                parts.append(b',"usage":' + usage)
            if finish and not p.include_usage:
                parts.append(self._fingerprint_field)
            parts.append(b',"kv_transfer_params":null}\n\n')
        else:
            parts.append(b'}],"usage":' + usage + b"}\n\n")
        return b"".join(parts)

    def _usage_chunk(self) -> bytes:
        usage = _usage(len(self._p.prompt_ids), self._emitted + self._usage_excess)
        return self._usage_head + usage + self._fingerprint_field + b"}\n\n"


def _usage(prompt: int, completion: int) -> bytes:
    """The ``usage`` object of a stream chunk."""
    return b'{"prompt_tokens":%d,"total_tokens":%d,"completion_tokens":%d}' % (
        prompt,
        prompt + completion,
        completion,
    )
