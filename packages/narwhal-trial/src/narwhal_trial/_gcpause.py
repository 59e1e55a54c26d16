"""The trial's measured phase runs with the cyclic GC paused (``narwhal_engine_client.gc_paused``,
shared with ``narwhal-profile``'s sweeps)."""

from __future__ import annotations

from narwhal_engine_client import gc_paused

__all__ = ["gc_paused"]
