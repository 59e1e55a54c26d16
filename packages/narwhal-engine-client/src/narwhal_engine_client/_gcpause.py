"""A measured phase runs with Python's cyclic garbage collector paused, as ``timeit`` does.

A full collection scans every tracked object; with tens of thousands of records alive it stalled
the event loop for up to ~100 ms, long enough to push offers past ``--max-lag``. Reference counting
still frees almost everything a request allocates; what cycles remain are collected when the
phase ends. Objects alive before the phase are frozen (``gc.freeze``) so no later collection
rescans them.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Freeze and disable the cyclic GC for the block; restore it afterwards.

    No collection first: a full one over the imported libraries costs ~15 ms before the first
    request, and what garbage it would free is kept only until the block ends.
    """
    was_enabled = gc.isenabled()
    gc.freeze()
    gc.disable()
    try:
        yield
    finally:
        gc.unfreeze()
        if was_enabled:
            gc.enable()
