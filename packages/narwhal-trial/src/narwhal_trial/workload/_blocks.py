"""Prompts of a scheduled workload (sampler ``pool-blocks-v1``) and the prefix reuse they keep.

Request n of a scheduled workload has exactly ``input_tokens[n]`` prompt tokens drawn from the
pool. Without ``hash_ids`` they are drawn as the runbook's sampler does:
``pool[default_rng(seed + n).integers(0, len(pool), size)]``. With ``hash_ids`` the prompt is
the concatenation of its blocks, block id h being ``pool[default_rng([seed, 1, h]).integers(0,
len(pool), block_tokens)]``: equal ids give identical token blocks, in every request. The last
block is cut to the request's length; a prompt longer than its blocks is completed with tokens
drawn from ``default_rng(seed + n)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from narwhal_trial.workload._schedule import PrefixReuse

Ids = np.ndarray[Any, np.dtype[np.int64]]
_BLOCK_STREAM = 1
"""The middle word of a block's seed: block streams never coincide with a request's."""


class BlockSampler:
    """Builds prompts, keeping each block id's tokens once drawn (traces reuse blocks)."""

    def __init__(self, pool: Sequence[int], seed: int, block_tokens: int) -> None:
        self.pool = np.asarray(pool, dtype=np.int64)
        self.seed = seed
        self.block_tokens = block_tokens
        self._blocks: dict[int, Ids] = {}

    def block(self, block_id: int) -> Ids:
        got = self._blocks.get(block_id)
        if got is None:
            rng = np.random.default_rng([self.seed, _BLOCK_STREAM, block_id])
            got = self.pool[rng.integers(0, len(self.pool), size=self.block_tokens)]
            self._blocks[block_id] = got
        return got

    def prompt(self, n: int, input_tokens: int, hash_ids: Sequence[int] | None) -> Ids:
        """Request ``n``'s prompt of exactly ``input_tokens`` ids (see the module's docstring)."""
        if not hash_ids:
            rng = np.random.default_rng(self.seed + n)
            return self.pool[rng.integers(0, len(self.pool), size=input_tokens)]
        full = -(-input_tokens // self.block_tokens)
        parts = [self.block(h) for h in hash_ids[:full]]
        have = len(parts) * self.block_tokens
        if have < input_tokens:
            rng = np.random.default_rng(self.seed + n)
            parts.append(self.pool[rng.integers(0, len(self.pool), size=input_tokens - have)])
        return np.concatenate(parts)[:input_tokens]


def prefix_reuse(
    hash_ids: Sequence[Sequence[int]], input_tokens: Sequence[int], block_tokens: int
) -> PrefixReuse:
    """Whether equal ids always sit behind the same ids (so equal ids are an equal prefix), and
    the blocks and tokens that repeat an earlier request's."""
    parent_of: dict[int, int | None] = {}
    seen: set[int] = set()
    blocks = reused = reused_tokens = 0
    problem: str | None = None
    for n, (ids, length) in enumerate(zip(hash_ids, input_tokens, strict=True)):
        used = ids[: -(-length // block_tokens)]
        mine: set[int] = set()
        for k, h in enumerate(used):
            parent = used[k - 1] if k else None
            before = parent_of.setdefault(h, parent)
            if before != parent and problem is None:
                problem = (
                    f"request {n}: block id {h} follows {_named(parent)}, but "
                    f"{_named(before)} in an earlier request"
                )
            blocks += 1
            if h in seen:
                reused += 1
                reused_tokens += min(block_tokens, length - k * block_tokens)
            mine.add(h)
        seen |= mine
    return PrefixReuse(
        holds=problem is None,
        blocks=blocks,
        reused_blocks=reused,
        reused_tokens=reused_tokens,
        problem=problem,
    )


def _named(parent: int | None) -> str:
    return "the prompt's start" if parent is None else f"block id {parent}"
