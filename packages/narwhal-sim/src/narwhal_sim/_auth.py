"""Bearer keys as ``vllm serve --api-key`` checks them (vLLM's ``AuthenticationMiddleware``)."""

from __future__ import annotations

import hmac
import os

from narwhal_sim._http import Request

UNAUTHORIZED = b'{"error":"Unauthorized"}'
"""vLLM's 401 body for a missing or wrong key."""

GUARDED = {"0.11": ("/v1",), "0.33": ("/v1", "/v2", "/inference", "/cohere")}
"""The path prefixes vLLM protects, by API style; ``/health``, ``/metrics``, ``/tokenize`` and the
other routes are open."""


def env_key(name: str | None) -> str | None:
    """The key held in environment variable ``name``; None when no name, or unset or empty."""
    return (os.environ.get(name) if name else None) or None


def authorized(key: str | None, prefixes: tuple[str, ...] | None, req: Request) -> bool:
    """True when ``req`` needs no key (none configured, OPTIONS, a path outside ``prefixes``) or
    carries ``Authorization: Bearer <key>`` (scheme case-insensitive, constant-time compare).

    ``prefixes`` None guards every path.
    """
    if key is None or req.method == "OPTIONS":
        return True
    if prefixes is not None and not req.path.startswith(prefixes):
        return True
    scheme, _, given = req.headers.get("authorization", "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), key.encode())
