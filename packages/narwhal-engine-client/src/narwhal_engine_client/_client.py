"""EngineClient: one async HTTP client for one vLLM engine."""

from __future__ import annotations

import json
import os
import ssl
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from types import TracebackType
from typing import Any, Literal, Self

import httpx

from narwhal_engine_client._errors import (
    EngineClientError,
    EngineConnectError,
    EngineHTTPError,
    EngineProtocolError,
    EngineTimeoutError,
    http_error,
)
from narwhal_engine_client._metrics import MetricsSnapshot
from narwhal_engine_client._record import StreamRecord
from narwhal_engine_client._replies import (
    ModelCard,
    TokenizeResult,
    decode_json,
    json_object,
    parse_detokenize,
    parse_models,
    parse_tokenize,
    parse_version,
)
from narwhal_engine_client._resend import send_with_resend
from narwhal_engine_client._server_info import SERVER_INFO_PATH, SchedulerConfig, parse_server_info
from narwhal_engine_client._transports.httpx import run_stream
from narwhal_engine_client._transports.raw import RawStreamPool

_JSON = {"Content-Type": "application/json"}

StreamTransport = Literal["httpx", "raw"]
STREAM_TRANSPORTS: tuple[StreamTransport, ...] = ("httpx", "raw")

DEFAULT_KEEPALIVE_EXPIRY_S = 4.0
"""Seconds an idle keep-alive connection is kept for reuse: below vLLM's own 5 s
(``VLLM_HTTP_TIMEOUT_KEEP_ALIVE``, uvicorn's ``timeout_keep_alive``), so the client gives up a
connection before the server closes it."""


def _tls_verification(base_url: str) -> ssl.SSLContext | bool:
    """What the HTTP client verifies TLS with: httpx's default (the CA bundle) for ``https://``.

    httpx loads its CA bundle for every client it builds, about 50 ms each, though a client for a
    ``http://`` engine never speaks TLS (its base URL is fixed and redirects are not followed).
    Such a client gets an empty context instead, which still requires a certificate and checks
    host names but trusts no CA: were TLS ever attempted, it would fail closed.
    """
    if base_url.lower().startswith("http://"):
        return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    return True


class EngineClient:
    """An async client for one engine; owns one ``httpx.AsyncClient`` (use ``async with`` or
    ``aclose``).

    ``api_key`` is sent as ``Authorization: Bearer ...`` on every request and kept only inside the
    httpx client's headers: it is never in ``repr``, in errors or in records. ``timeout_s`` bounds
    each network operation and, by default, each whole request; ``connect_timeout_s`` bounds
    connecting. ``clock_ns`` is the monotonic clock of every StreamRecord time.
    """

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        timeout_s: float = 600.0,
        max_connections: int = 256,
        transport: httpx.AsyncBaseTransport | None = None,
        clock_ns: Callable[[], int] = time.perf_counter_ns,
        connect_timeout_s: float = 10.0,
        stream_transport: StreamTransport = "httpx",
        keepalive_expiry_s: float = DEFAULT_KEEPALIVE_EXPIRY_S,
    ) -> None:
        if stream_transport not in STREAM_TRANSPORTS:
            raise ValueError(f"stream_transport must be 'httpx' or 'raw', got {stream_transport!r}")
        if not (timeout_s > 0 and connect_timeout_s > 0):
            raise ValueError("timeouts must be positive")
        if not keepalive_expiry_s > 0:
            raise ValueError(f"keepalive_expiry_s must be positive, got {keepalive_expiry_s!r}")
        if max_connections < 1:
            raise ValueError("max_connections must be at least 1")
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self._clock_ns = clock_ns
        self.keepalive_expiry_s = keepalive_expiry_s
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._has_key = bool(api_key)
        self._transport = transport
        self._http = self._httpx_client(
            headers,
            httpx.Timeout(timeout_s, connect=min(connect_timeout_s, timeout_s)),
            httpx.Limits(
                max_connections=max_connections,
                max_keepalive_connections=max_connections,
                keepalive_expiry=keepalive_expiry_s,
            ),
        )
        self._fresh: httpx.AsyncClient | None = None  # built for the first resend
        self.stream_transport: StreamTransport = stream_transport
        self._raw: RawStreamPool | None = None
        if stream_transport == "raw":
            self._raw = RawStreamPool(
                self.base_url,
                api_key=api_key,
                max_connections=max_connections,
                connect_timeout_s=min(connect_timeout_s, timeout_s),
                clock_ns=clock_ns,
                keepalive_expiry_s=keepalive_expiry_s,
            )

    def _httpx_client(
        self, headers: dict[str, str], timeout: httpx.Timeout, limits: httpx.Limits
    ) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            base_url=self.base_url,
            headers=headers,
            timeout=timeout,
            limits=limits,
            transport=self._transport,
            follow_redirects=False,
            trust_env=False,
            verify=_tls_verification(self.base_url),
        )

    def _fresh_client(self) -> httpx.AsyncClient:
        """A client that keeps no idle connection, so every request it sends opens a new one:
        where a request is sent again after a reused connection closed on it unanswered."""
        if self._fresh is None:
            self._fresh = self._httpx_client(
                dict(self._http.headers),
                self._http.timeout,
                httpx.Limits(max_keepalive_connections=0),
            )
        return self._fresh

    @classmethod
    def from_env(cls, base_url: str, api_key_env: str | None, **kw: Any) -> EngineClient:
        """Build a client whose key comes from the variable ``api_key_env`` (None: no key).

        A named variable that is unset or empty is an EngineClientError naming the variable (not a
        value).
        """
        key: str | None = None
        if api_key_env is not None:
            key = os.environ.get(api_key_env)
            if not key:
                raise EngineClientError(
                    f"environment variable {api_key_env} (api_key_env for {base_url}) is not set"
                )
        return cls(base_url, api_key=key, **kw)

    def __repr__(self) -> str:
        return (
            f"EngineClient(base_url={self.base_url!r}, api_key={'set' if self._has_key else None})"
        )

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def preconnect(self, count: int) -> int:
        """Open keep-alive connections for ``stream_completion`` ahead of time, so the first
        ``count`` concurrent streams do not each pay a TCP connect; returns how many are idle.

        Only the raw stream transport keeps such a pool (httpx opens connections per request):
        with ``stream_transport="httpx"`` this does nothing and returns 0. Bounded by
        ``max_connections``; a failed connect raises EngineConnectError or EngineTimeoutError.
        """
        if count < 0:
            raise ValueError(f"count must not be negative, got {count}")
        if self._raw is None:
            return 0
        return await self._raw.preconnect(count)

    async def drop_idle_connections(self) -> int:
        """Close every idle keep-alive connection (requests in flight keep theirs), so the next
        requests go out on new connections; returns how many were closed."""
        dropped = 0
        if self._raw is not None:
            dropped += self._raw.drop_idle()
        pool = getattr(self._http, "_transport", None)
        pool = getattr(pool, "_pool", None)  # httpx keeps no public handle on its pool
        for conn in list(getattr(pool, "connections", ())):
            if conn.is_idle():
                await conn.aclose()
                dropped += 1
        return dropped

    async def aclose(self) -> None:
        """Close the connection pools."""
        try:
            if self._raw is not None:
                await self._raw.aclose()
        finally:
            try:
                await self._http.aclose()
            finally:
                if self._fresh is not None:
                    await self._fresh.aclose()

    async def _call(
        self, method: str, path: str, *, body: Any = None, headers: dict[str, str] | None = None
    ) -> httpx.Response:
        """One non-streaming request; transport errors wrapped, body read in full. Sent once more
        on a new connection when a reused one closed before answering (no call here has side
        effects)."""
        content = None if body is None else json.dumps(body, allow_nan=False).encode("utf-8")
        sent = dict(headers or {})
        if content is not None:
            sent.update(_JSON)
        try:
            request = self._http.build_request(method, path, content=content, headers=sent)
            return await send_with_resend(self._http, request, self._fresh_client)
        except httpx.TimeoutException as exc:
            raise EngineTimeoutError(
                f"{method} {self.base_url}{path} timed out: {type(exc).__name__}"
            ) from exc
        except httpx.TransportError as exc:
            raise EngineConnectError(
                f"{method} {self.base_url}{path} failed: {type(exc).__name__}: {exc}"
            ) from exc
        except httpx.HTTPError as exc:
            raise EngineProtocolError(
                f"{method} {self.base_url}{path}: {type(exc).__name__}: {exc}"
            ) from exc

    async def _json(
        self, method: str, path: str, *, body: Any = None, headers: dict[str, str] | None = None
    ) -> Any:
        response = await self._call(method, path, body=body, headers=headers)
        if response.status_code != 200:
            raise self._http_error(response, path)
        return decode_json(response.content, f"{method} {path}")

    def _http_error(self, response: httpx.Response, path: str) -> EngineHTTPError:
        return http_error(
            response.status_code, response.content, response.reason_phrase, self.base_url + path
        )

    async def health(self) -> int:
        """``GET /health``: the HTTP status (200 is healthy). Raises only on transport errors."""
        return (await self._call("GET", "/health")).status_code

    async def version(self) -> str:
        """``GET /version``: the engine's version string."""
        return parse_version(await self._json("GET", "/version"))

    async def models(self) -> list[ModelCard]:
        """``GET /v1/models``: one card per served model name."""
        return parse_models(await self._json("GET", "/v1/models"))

    async def scheduler_config(self) -> SchedulerConfig | None:
        """``GET /server_info?config_format=json``: the engine's scheduler settings, or None when it
        does not show them: a 404 (vLLM serves the path only with ``VLLM_SERVER_DEV_MODE=1``), a
        body that is not JSON, or one without ``vllm_config.scheduler_config``. Another status is
        an EngineHTTPError; transport failures raise as for every call."""
        response = await self._call("GET", SERVER_INFO_PATH)
        if response.status_code == 404:
            return None
        if response.status_code != 200:
            raise self._http_error(response, SERVER_INFO_PATH)
        return parse_server_info(response.content)

    async def tokenize(
        self, prompt: str, *, model: str | None = None, add_special_tokens: bool = False
    ) -> TokenizeResult:
        """``POST /tokenize``: token ids and the live ``max_model_len`` (a positive int, else an
        error).
        """
        body: dict[str, Any] = {"prompt": prompt, "add_special_tokens": add_special_tokens}
        if model is not None:
            body["model"] = model
        return parse_tokenize(await self._json("POST", "/tokenize", body=body))

    async def detokenize(self, tokens: Sequence[int], *, model: str | None = None) -> str:
        """``POST /detokenize``: the text of ``tokens``."""
        body: dict[str, Any] = {"tokens": [int(t) for t in tokens]}
        if model is not None:
            body["model"] = model
        return parse_detokenize(await self._json("POST", "/detokenize", body=body))

    async def metrics(self, *, names: Collection[str] | None = None) -> MetricsSnapshot:
        """``GET /metrics``, parsed: every family, or only those of ``names`` (sample or family
        names; see ``MetricsSnapshot.from_text``)."""
        response = await self._call("GET", "/metrics")
        if response.status_code != 200:
            raise self._http_error(response, "/metrics")
        return MetricsSnapshot.from_text(response.text, names)

    async def complete(
        self, body: Mapping[str, Any], *, request_id: str | None = None
    ) -> dict[str, Any]:
        """Non-streaming ``POST /v1/completions``; the JSON answer. EngineHTTPError on non-200."""
        extra = {"X-Request-Id": request_id} if request_id is not None else None
        doc = await self._json("POST", "/v1/completions", body=dict(body), headers=extra)
        return json_object(doc, "POST /v1/completions")

    async def stream_completion(
        self,
        body: bytes | Mapping[str, Any],
        *,
        request_id: str,
        timeout_s: float | None = None,
        keep_token_ids: bool = False,
        send_by_ns: int | None = None,
        on_sent: Callable[[], None] | None = None,
    ) -> StreamRecord:
        """Stream one completion; request-level failures land in ``StreamRecord.error``.

        ``body`` is best built with ``completion_body`` (bytes); a mapping is encoded here, before
        the clock starts. ``timeout_s`` is the whole-request deadline (default: the client's
        ``timeout_s``). ``X-Request-Id: request_id`` is always sent. With
        ``stream_transport="raw"`` the request goes over the raw HTTP/1.1 pool instead of httpx.

        ``send_by_ns`` (a reading of the client's clock) makes the send conditional: when the
        request's head would start onto the wire later than that, with the send time stamped,
        nothing is written and the record carries a ``SendDeadlineError``. An open-loop load
        generator uses it so an offer that is already too late is refused, never sent late.
        ``on_sent`` is called once, synchronously, just before the request's head is written (never
        for a request refused by ``send_by_ns``): a load generator counts what is on the wire.
        """
        if isinstance(body, bytes):
            content = body
        else:
            content = json.dumps(dict(body), separators=(",", ":"), allow_nan=False).encode()
        deadline_s = self.timeout_s if timeout_s is None else timeout_s
        if self._raw is not None:
            return await self._raw.stream(
                content,
                request_id=request_id,
                deadline_s=deadline_s,
                keep_token_ids=keep_token_ids,
                send_by_ns=send_by_ns,
                on_sent=on_sent,
            )
        request = self._http.build_request(
            "POST",
            "/v1/completions",
            content=content,
            headers={"Content-Type": "application/json", "X-Request-Id": request_id},
        )
        return await run_stream(
            self._http,
            request,
            request_id=request_id,
            clock_ns=self._clock_ns,
            deadline_s=deadline_s,
            keep_token_ids=keep_token_ids,
            bytes_sent=len(content),
            send_by_ns=send_by_ns,
            on_sent=on_sent,
            fresh=self._fresh_client,
        )
