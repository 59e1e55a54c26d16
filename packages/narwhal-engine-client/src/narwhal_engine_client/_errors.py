"""The exceptions of narwhal_engine_client.

Every error this package raises or records derives from one root::

    EngineClientError                      root; also configuration errors (bad model, unset key)
    ├── EngineHTTPError(status, message, error_type, url)
    │                                      non-2xx answer; message parsed from {"error": {...}},
    │                                      flat {"object": "error", ...}, {"error": "Unauthorized"}
    ├── EngineStreamError(message, code)   a mid-stream ``data: {"error": ...}`` event
    ├── StreamCutError                     the stream ended (or broke) before ``data: [DONE]``
    ├── EngineTimeoutError                 a network operation or the request deadline timed out
    ├── EngineConnectError                 refused, DNS failure, connection lost before a response
    ├── EngineProtocolError                unparseable or ill-typed body, SSE event or metrics page
    └── ContractMismatchError(key, expected, live)
                                           a live engine fact disagrees with the engine contract

Every exception keeps its constructor arguments as attributes and pickles with them
(``__reduce__``), so trial workers can pass them between processes. No message ever contains an
API key: the client never puts request headers into an error.
"""

from __future__ import annotations

import json
from typing import Any


class EngineClientError(Exception):
    """Root of every error of narwhal_engine_client."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.message,))


class EngineHTTPError(EngineClientError):
    """The engine answered with a non-success status; ``message`` is the engine's own message,
    ``url`` the URL asked (never with credentials; None when not known)."""

    def __init__(
        self, status: int, message: str, error_type: str | None = None, url: str | None = None
    ) -> None:
        text = f"HTTP {status}: {message}" + (f" ({error_type})" if error_type else "")
        super().__init__(text)
        self.status = status
        self.message = message
        self.error_type = error_type
        self.url = url

    def __str__(self) -> str:
        suffix = f" ({self.error_type})" if self.error_type else ""
        return f"HTTP {self.status}: {self.message}{suffix}"

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.status, self.message, self.error_type, self.url))


class EngineStreamError(EngineClientError):
    """The engine sent an error event inside an HTTP 200 stream."""

    def __init__(self, message: str, code: int | str | None = None) -> None:
        super().__init__(message)
        self.code = code

    def __str__(self) -> str:
        suffix = f" (code {self.code})" if self.code is not None else ""
        return f"error event in stream: {self.message}{suffix}"

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.message, self.code))


class StreamCutError(EngineClientError):
    """The stream ended, or the connection broke, before ``data: [DONE]``."""


class EngineTimeoutError(EngineClientError):
    """A network operation or the whole-request deadline timed out."""


class EngineConnectError(EngineClientError):
    """The engine could not be reached (refused, DNS) or dropped the connection before answering."""


class SendDeadlineError(EngineClientError):
    """The request was not sent: its head could not start onto the wire by ``send_by_ns``."""


class EngineProtocolError(EngineClientError):
    """A body, SSE event or metrics page could not be parsed or had the wrong types."""


class ContractMismatchError(EngineClientError):
    """A live engine fact disagrees with the expected value in the engine contract."""

    def __init__(self, key: str, expected: Any, live: Any) -> None:
        super().__init__(
            f"engine contract mismatch on {key!r}: expected {expected!r}, live {live!r}"
        )
        self.key = key
        self.expected = expected
        self.live = live

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.key, self.expected, self.live))


ERROR_BODY_LIMIT = 65536
"""Bytes of a non-200 body read for its error message; the rest is not read."""


def http_error(
    status: int, content: bytes, reason: str = "", url: str | None = None
) -> EngineHTTPError:
    """Build an EngineHTTPError from a non-success response body, whatever its shape.

    Understands ``{"error": {"message", "type", "code"}}`` (vLLM >= 0.10.1), the flat ``{"object":
    "error", "message", "type"}`` (older), ``{"error": "Unauthorized"}`` (the api-key middleware)
    and FastAPI's ``{"detail": ...}``; anything else keeps up to 200 characters of the body, or the
    reason phrase.
    """
    message: str | None = None
    error_type: str | None = None
    try:
        doc = json.loads(content) if content else None
    except ValueError:
        doc = None
    if isinstance(doc, dict):
        inner = doc.get("error")
        if isinstance(inner, dict):
            message = _as_text(inner.get("message"))
            error_type = _as_text(inner.get("type"))
        elif isinstance(inner, str):
            message = inner
        elif doc.get("object") == "error" or "message" in doc:
            message = _as_text(doc.get("message"))
            error_type = _as_text(doc.get("type"))
        elif "detail" in doc:
            message = _as_text(doc.get("detail"))
    if not message:
        text = content.decode("utf-8", "replace").strip()[:200]
        message = text or reason or "no error message"
    return EngineHTTPError(status, message, error_type, url)


def _as_text(value: object) -> str | None:
    if value is None:
        return None
    return value if isinstance(value, str) else json.dumps(value)


def describe(exc: BaseException) -> str:
    """``Type: message`` of an exception (just the type when the message is empty)."""
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
