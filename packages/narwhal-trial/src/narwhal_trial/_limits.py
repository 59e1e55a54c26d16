"""The bounds of the trial's values, checked before anything is touched, and the client's default
in-flight limit that ``predict`` models too.

Request bodies are encoded up front (~50 kB each at 8,192 input tokens), every in-flight request
holds a socket, and a schedule must end within a day (README "Bounds").
"""

from __future__ import annotations

MAX_REQUESTS = 100_000
MAX_RATE = 10_000.0
MAX_SCHEDULE_S = 86_400.0
MAX_IN_FLIGHT = 4096

DEFAULT_MAX_IN_FLIGHT = 64
"""``run``'s ``--max-in-flight``, and what ``predict`` models by default."""
