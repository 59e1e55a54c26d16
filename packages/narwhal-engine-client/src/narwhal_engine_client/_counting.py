"""How a stream's tokens are counted per chunk: which request fields ask the engine for counts.

A chunk may carry several tokens (vLLM's ``--stream-interval N``, or its API server merging steps
when it falls behind), so a timed stream never assumes one token per chunk. vLLM 0.10.2 added
``return_token_ids`` (each chunk's delta ids); every version before it knows
``stream_options.continuous_usage_stats`` (a cumulative ``usage`` on every chunk). An engine whose
version cannot be read is asked for both; the consumer prefers ``token_ids``.
"""

from __future__ import annotations

import re
from typing import Literal

TokenCounting = Literal["token_ids", "usage", "both"]
"""``token_ids``: ask for ``return_token_ids``; ``usage``: ask for ``continuous_usage_stats``;
``both``: ask for both (the engine's version is unknown)."""

TOKEN_IDS_SINCE = (0, 10, 2)
"""The first vLLM release that knows the ``return_token_ids`` request field."""

_VERSION = re.compile(r"v?(\d+)\.(\d+)(?:\.(\d+))?")


def version_tuple(version: str | None) -> tuple[int, int, int] | None:
    """``"0.11.0"`` → ``(0, 11, 0)`` (also ``"v0.32.0+cpu"``, ``"0.10.2rc1"``); None: unreadable."""
    if not version:
        return None
    match = _VERSION.match(version.strip())
    if match is None:
        return None
    major, minor, patch = match.groups()
    return int(major), int(minor), int(patch or 0)


def token_counting(version: str | None) -> TokenCounting:
    """The per-chunk counting to ask an engine of ``version`` (``GET /version``) for."""
    parsed = version_tuple(version)
    if parsed is None:
        return "both"
    return "token_ids" if parsed >= TOKEN_IDS_SINCE else "usage"
