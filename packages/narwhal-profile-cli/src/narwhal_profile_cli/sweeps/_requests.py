"""One measured completion: built before the clock starts, checked first, verified after."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from narwhal_engine_client import (
    EngineConnectError,
    StreamCutError,
    StreamRecord,
    TokenCounting,
    completion_body,
)
from narwhal_profile_cli._errors import ProfileAbortError
from narwhal_profile_cli.sweeps._preflight import EngineProbe
from narwhal_store import Remeasured

_ASKED: dict[TokenCounting, str] = {
    "token_ids": "return_token_ids",
    "usage": "stream_options.continuous_usage_stats",
    "both": "return_token_ids and stream_options.continuous_usage_stats",
}


@dataclass(slots=True)
class RequestIds:
    """Unique ``X-Request-Id`` values: ``np-<run>-<engine>-<tag>-<n>``."""

    run_id: str
    _counter: itertools.count[int] = field(default_factory=itertools.count)

    def next(self, iid: str, tag: str) -> str:
        """A new request id for ``iid``."""
        return f"np-{self.run_id}-{iid}-{tag}-{next(self._counter)}"


class OnWire:
    """Counts requests starting onto the wire (the engine client's ``on_sent``), so work for the
    next requests can wait until the engine has this one and then run while it works."""

    def __init__(self, expected: int = 1) -> None:
        self._event = asyncio.Event()
        self._left = expected

    def __call__(self) -> None:
        self._left -= 1
        if self._left <= 0:
            self._event.set()

    async def wait(self, task: asyncio.Future[Any]) -> None:
        """Until every expected request is on the wire (or ``task``, which sends them, ended),
        then one more loop turn so the last request's body reaches the socket."""
        waiter = asyncio.ensure_future(self._event.wait())
        try:
            await asyncio.wait({waiter, task}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
        await asyncio.sleep(0)


def transport_failure(records: list[StreamRecord]) -> Remeasured | None:
    """What to record when a request of ``records`` failed for a transport reason (it could not
    reach the engine, or its connection broke), which a new measurement on new connections may
    not meet again; None when none did. An engine's own refusal (an HTTP error, an error event,
    wrong counts) or a timeout is not one: it is the engine's answer, and aborts."""
    failed = [r for r in records if isinstance(r.error, EngineConnectError | StreamCutError)]
    if not failed:
        return None
    first = failed[0]
    reason = f"request {first.request_id} failed: {first.error}"
    if len(failed) > 1:
        reason += f" (and {len(failed) - 1} more of the {len(records)})"
    return Remeasured(request_ids=[r.request_id for r in failed], reason=reason)


async def fresh_connections(probe: EngineProbe) -> None:
    """Close the engine client's idle connections, so what is measured again goes out on new
    ones."""
    await probe.client.drop_idle_connections()


async def send_again(
    probe: EngineProbe, build: Callable[[], PreparedRequest]
) -> tuple[PreparedRequest, StreamRecord]:
    """Measure a single request once more, on new connections: a new request from ``build``."""
    await fresh_connections(probe)
    request = build()
    record = await probe.client.stream_completion(request.body, request_id=request.request_id)
    return request, record


@dataclass(frozen=True, slots=True)
class PreparedRequest:
    """A completion ready to send: its id, encoded body and the token counts it asks for."""

    request_id: str
    body: bytes
    input_tokens: int
    output_tokens: int


def prepare(
    probe: EngineProbe, prompt: list[int], output_tokens: int, request_id: str
) -> PreparedRequest:
    """Encode one completion after checking that input plus requested output fits the engine.

    The prompt is a token-id list, so its tokenised length is exactly ``len(prompt)``; the engine's
    ``usage.prompt_tokens`` is compared with it once the request completes (:func:`verify`).
    """
    if len(prompt) + output_tokens > probe.max_model_len:
        raise ProfileAbortError(
            f"engine {probe.iid}: a request of {len(prompt)} input + {output_tokens} output tokens "
            f"does not fit the live max_model_len {probe.max_model_len}",
            engine=probe.iid,
            code="max_model_len",
        )
    body = completion_body(
        model=probe.model,
        prompt=prompt,
        max_tokens=output_tokens,
        min_tokens=output_tokens,
        token_counting=probe.counting,
    )
    return PreparedRequest(request_id, body, len(prompt), output_tokens)


def verify(probe: EngineProbe, request: PreparedRequest, record: StreamRecord) -> None:
    """Abort unless the stream completed with exactly the prompt and output token counts sent,
    and every chunk's token count came from the engine (a chunk time is never turned into a
    per-token time on a guess; the chunk counts adding up to the usage is checked by the client).
    """
    iid = probe.iid
    if not record.counted:
        raise ProfileAbortError(
            f"engine {iid} (vLLM {probe.version or 'of unknown version'}): request "
            f"{request.request_id} got {record.uncounted_chunks} of {len(record.chunk_ns)} "
            "content chunks without a token count (asked for "
            f"{_ASKED[probe.counting]}); without exact per-chunk counts chunk times cannot "
            "be turned into a TPOT",
            engine=iid,
            code="token_counts",
        )
    if record.error is not None or not record.ok:
        reason = record.error if record.error is not None else "the stream did not complete"
        raise ProfileAbortError(
            f"engine {iid}: request {request.request_id} failed: {reason}",
            engine=iid,
            code="engine_error",
        )
    if record.prompt_tokens != request.input_tokens:
        raise ProfileAbortError(
            f"engine {iid}: request {request.request_id} sent {request.input_tokens} prompt tokens "
            f"but usage.prompt_tokens is {record.prompt_tokens}",
            engine=iid,
            code="prompt_tokens",
        )
    if record.completion_tokens != request.output_tokens:
        raise ProfileAbortError(
            f"engine {iid}: request {request.request_id} asked for {request.output_tokens} output "
            f"tokens but the engine produced {record.completion_tokens}",
            engine=iid,
            code="completion_tokens",
        )
    if record.first_token_ns is None:
        raise ProfileAbortError(
            f"engine {iid}: request {request.request_id} produced no content chunk",
            engine=iid,
            code="engine_error",
        )
