"""Bursty delivery: chunks that arrive together although the engine made them steps apart.

An engine's API server that falls behind flushes several engine steps at once: many chunks then
arrive microseconds apart (or in one network read), followed by a long gap. Exact per-chunk token
counts keep the TPOT right over a long window, but a short window or a cohort of few tokens then
gives a noisy point, and the engine's host, not its GPU, set the pace. A chunk interval is a
**burst** when it is shorter than ``BURST_FRACTION`` of what the chunk's tokens would take at the
stream's mean per-token interval in the window. Chunks that carry several tokens at the regular
pace (vLLM's ``--stream-interval N``) are not bursts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from narwhal_fit._errors import InsufficientDataError
from narwhal_fit._window import DecodeWindow

__all__ = ["BURST_FRACTION", "burst_share"]

BURST_FRACTION: Final = 0.25


def burst_share(
    chunks: Sequence[tuple[Sequence[int], Sequence[int]]],
    window: DecodeWindow,
    per_token_s: Sequence[float],
) -> float:
    """Share (0 to 1) of the cohort's in-window chunk intervals that are bursts.

    ``chunks[i]`` is stream ``i``'s ``(chunk_ns, chunk_tokens)``; ``per_token_s[i]`` its mean
    per-token interval in the window (``CohortTpot.per_stream``). An interval joins two chunks that
    both arrived inside the window; it is a burst when ``gap < BURST_FRACTION * tokens * mean``
    (``tokens``: the later chunk's count; a chunk without tokens is skipped). No interval: 0.0.
    """
    if len(chunks) != len(per_token_s):
        raise InsufficientDataError(
            f"got {len(chunks)} streams but {len(per_token_s)} per-token intervals"
        )
    bursts = intervals = 0
    for (times, tokens), mean_s in zip(chunks, per_token_s, strict=True):
        limit_ns = BURST_FRACTION * mean_s * 1e9
        previous: int | None = None
        for t, k in zip(times, tokens, strict=True):
            if k <= 0 or t < window.start_ns or t > window.end_ns:
                continue
            if previous is not None:
                intervals += 1
                if t - previous < limit_ns * k:
                    bursts += 1
            previous = t
    return bursts / intervals if intervals else 0.0
