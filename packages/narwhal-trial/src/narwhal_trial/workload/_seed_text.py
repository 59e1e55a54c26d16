"""The fixed public-domain seed prompt that ``prepare`` completes to obtain its token-id pool.

The opening of Charles Dickens, *A Tale of Two Cities* (1859), in the public domain. Changing this
text changes every workload prepared from now on; its SHA-256 is recorded in each workload file.
"""

from __future__ import annotations

SEED_PROMPT_NAME = "dickens-a-tale-of-two-cities-opening"

SEED_PROMPT = (
    "It was the best of times, it was the worst of times, it was the age of wisdom, it was the "
    "age of foolishness, it was the epoch of belief, it was the epoch of incredulity, it was the "
    "season of Light, it was the season of Darkness, it was the spring of hope, it was the winter "
    "of despair, we had everything before us, we had nothing before us, we were all going direct "
    "to Heaven, we were all going direct the other way"
)
