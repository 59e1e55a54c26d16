"""The event loop a run's client runs on: asyncio's own or uvloop, chosen by ``--loop``.

``asyncio`` (the default) and ``uvloop`` ask for one of them, and ``uvloop`` where it is not
installed is a usage error before anything is touched; ``auto`` takes uvloop when it can be
imported (every vLLM and Dynamo environment has it) and asyncio's loop otherwise. The choice
never changes the process's event-loop policy: the loop is made by a factory handed to
``asyncio.Runner``.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
from collections.abc import Callable
from typing import Literal

from narwhal_trial._errors import TrialUsageError

LoopChoice = Literal["auto", "asyncio", "uvloop"]
"""``--loop``: which event loop carries the run's requests."""
LOOP_CHOICES: tuple[LoopChoice, ...] = ("auto", "asyncio", "uvloop")
DEFAULT_LOOP: LoopChoice = "asyncio"
"""asyncio's own loop: measured against uvloop under the trial's client (``bench/loop_compare.py``,
docs/benchmarks.md) it cost no more CPU per request and added less to TTFT at the 99th
percentile, so the standard library's loop is the default and uvloop is asked for."""

LoopFactory = Callable[[], asyncio.AbstractEventLoop]


def uvloop_available() -> bool:
    """Whether ``import uvloop`` would find a module (nothing is imported)."""
    return importlib.util.find_spec("uvloop") is not None


def check_loop(choice: str) -> None:
    """Raise TrialUsageError for a ``--loop`` value this environment cannot honour."""
    if choice not in LOOP_CHOICES:
        raise TrialUsageError(f"--loop must be one of {', '.join(LOOP_CHOICES)}, got {choice!r}")
    if choice == "uvloop" and not uvloop_available():
        raise TrialUsageError(
            "--loop uvloop: uvloop is not installed in this environment (install the "
            "narwhal-trial[uvloop] extra, or use --loop asyncio)"
        )


def resolve_loop(choice: LoopChoice) -> tuple[LoopFactory | None, Literal["asyncio", "uvloop"]]:
    """The factory for ``asyncio.Runner`` (None: asyncio's default loop) and the loop's name, as
    the manifest records it."""
    check_loop(choice)
    if choice == "asyncio" or (choice == "auto" and not uvloop_available()):
        return None, "asyncio"
    try:
        module = importlib.import_module("uvloop")
    except ImportError as exc:  # found but broken (a wheel for another Python, say)
        if choice == "auto":
            return None, "asyncio"
        raise TrialUsageError(
            f"--loop uvloop: uvloop is installed but cannot be imported ({exc}); use --loop asyncio"
        ) from exc
    factory: LoopFactory = module.new_event_loop
    return factory, "uvloop"
