"""Exact-length prompts of fresh random token ids (docs/design.md §4 "Prompts").

The pool is the set of distinct ordinary token ids of a fixed public-domain text, as the
engine's own ``/tokenize`` returns them (no special tokens). Each prompt draws its ids from that
pool with a seeded generator; the first block of every prompt is kept distinct from every earlier
prompt's, so no two requests share a prefix and prefix caching cannot shorten a measurement.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from narwhal_profile_cli._errors import ProfileAbortError

# Herman Melville, *Moby-Dick; or, The Whale* (1851), from chapter 32 "Cetology": public domain.
POOL_TEXT = (
    "Already we are boldly launched upon the deep; but soon we shall be lost in its unshored,"
    " harbourless immensities. Ere that come to pass; ere the Pequod's weedy hull rolls side "
    "by side with the barnacled hulls of the leviathan; at the outset it is but well to "
    "attend to a matter almost indispensable to a thorough appreciative understanding of the "
    "more special leviathanic revelations and allusions of all sorts which are to follow. It "
    "is some systematized exhibition of the whale in his broad genera, that I would now fain "
    "put before you. Yet is it no easy task. The classification of the constituents of a "
    "chaos, nothing less is here essayed. Listen to what the best and latest authorities have"
    " laid down. There are only two books in being which at all pretend to put the living "
    "sperm whale before you, and at the same time, in the remotest degree succeed in the "
    "attempt. Those books are Beale's and Bennett's; both in their time surgeons to English "
    "South-Sea whale-ships, and both exact and reliable men. The original matter touching the"
    " sperm whale to be found in their volumes is necessarily small; but so far as it goes, "
    "it is of excellent quality, though mostly confined to scientific description. As yet, "
    "however, the sperm whale, scientific or poetic, lives not complete in any literature. "
    "Far above all other hunted whales, his is an unwritten life. Now the various species of "
    "whales need some sort of popular comprehensive classification, if only an easy outline "
    "one for the present, hereafter to be filled in all its departments by subsequent "
    "laborers. As no better man advances to take this matter in hand, I hereupon offer my own"
    " poor endeavors. I promise nothing complete; because any human thing supposed to be "
    "complete, must for that very reason infallibly be faulty. I shall not pretend to a "
    "minute anatomical description of the various species, or in this place at least to much "
    "of any description. My object here is simply to project the draught of a systematization"
    " of cetology. I am the architect, not the builder. The Narwhale, that is, Nostril whale,"
    " is another instance of a very curiously named whale. It is so called, I imagine, from "
    "his peculiar horn being originally mistaken for a peaked nose. The creature is some "
    "sixteen feet in length, while its horn averages five feet, though some exceed ten, and "
    "even attain to fifteen feet. Strictly speaking, this horn is but a lengthened tusk, "
    "growing out from the jaw in a line a little depressed from the horizontal."
)

#: A pool smaller than this cannot make prompts that differ enough to defeat prefix caching.
MIN_POOL = 32
#: Tokens at the head of each prompt kept unique across the run (a KV-cache block or more).
UNIQUE_HEAD = 16
_MAX_DRAWS = 1000


def token_pool(tokens: Sequence[int]) -> tuple[int, ...]:
    """The distinct token ids of the tokenised pool text, ascending."""
    return tuple(sorted({int(t) for t in tokens}))


class PromptFactory:
    """Seeded source of exact-length token-id prompts with pairwise distinct heads."""

    def __init__(self, pool: Sequence[int], seed: int) -> None:
        if len(pool) < MIN_POOL:
            raise ValueError(
                f"a token pool needs at least {MIN_POOL} distinct ids, got {len(pool)}"
            )
        self._pool = tuple(pool)
        self._rng = random.Random(seed)
        self._heads: set[tuple[int, ...]] = set()

    def prompt(self, length: int) -> list[int]:
        """A fresh prompt of exactly ``length`` token ids."""
        if length < 1:
            raise ValueError(f"prompt length must be positive, got {length}")
        head_len = min(UNIQUE_HEAD, length)
        for _ in range(_MAX_DRAWS):
            head = tuple(self._rng.choices(self._pool, k=head_len))
            if (head_len, *head) not in self._heads:
                break
        else:  # only reachable for tiny lengths, where the space of heads runs out
            raise ProfileAbortError(
                f"cannot draw another distinct {length}-token prompt from the {len(self._pool)}-id "
                f"token pool after {len(self._heads)} prompts; use longer prompt lengths",
                code="prompts_exhausted",
            )
        self._heads.add((head_len, *head))
        return [*head, *self._rng.choices(self._pool, k=length - head_len)]
