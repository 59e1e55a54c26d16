"""Progress on stderr (engine, phase, point, ETA), only when stderr is a terminal.

docs/design.md §8.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TextIO

# Relative costs only (an 8B model on one recent GPU); the ETA rescales them by the observed speed.
_TTFT = (0.013, 1.9e-5, 5.1e-10)
_STEP_S = 0.006


def prefill_weight(length: int) -> float:
    """Work units of one prefill request of ``length`` tokens."""
    a, b, c = _TTFT
    return a + b * length + c * length * length


def cohort_weight(input_len: int, concurrency: int, output_tokens: int) -> float:
    """Work units of one decode cohort: the prefill ramp of every stream, then the decode."""
    return concurrency * prefill_weight(input_len) + output_tokens * _STEP_S


def sweep_weight(
    prefill_lens: Sequence[int],
    input_lens: Sequence[int],
    concurrencies: Sequence[int],
    prefill_repeats: int,
    decode_repeats: int,
    output_tokens: int,
) -> float:
    """Work units of one engine's whole sweep (warm-up excluded)."""
    prefill = prefill_repeats * sum(prefill_weight(n) for n in prefill_lens)
    decode = decode_repeats * sum(
        cohort_weight(n, c, output_tokens) for n in input_lens for c in concurrencies
    )
    return prefill + decode


def mixing_weight(input_len: int, concurrency: int, prefill_len: int, prefills: int) -> float:
    """Work units of one mixing point: the streams' ramp, two quiet stretches (20 steps, at least
    0.1 s each) and the prefills, each followed by two more TTFTs of decoding."""
    quiet = max(20 * _STEP_S, 0.1)
    return (
        concurrency * prefill_weight(input_len)
        + 2 * quiet
        + 3 * prefills * prefill_weight(prefill_len)
    )


def _duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


class Progress:
    """A one-line status rewritten in place; silent when ``enabled`` is false.

    The line shows every engine at work (one per GPU group with ``--parallel-groups``), each as
    ``engine · phase · point``, then the ETA; :meth:`finish` takes an engine off the line.

    Work is counted in units of roughly the time each request takes on a typical GPU
    (:func:`prefill_weight`, :func:`cohort_weight`); the ETA is the elapsed time per finished unit
    times the units left, so it adapts to how fast the engine really is.
    """

    def __init__(
        self,
        stream: TextIO,
        *,
        enabled: bool,
        clock_ns: Callable[[], int] = time.monotonic_ns,
    ) -> None:
        self._stream = stream
        self.enabled = enabled
        self._clock_ns = clock_ns
        self._start_ns = clock_ns()
        self._total = 0.0
        self._done = 0.0
        self._width = 0
        self._at_work: dict[str, str] = {}

    @classmethod
    def for_stream(cls, stream: TextIO) -> Progress:
        """Enabled exactly when ``stream`` is a terminal."""
        try:
            interactive = stream.isatty()
        except (AttributeError, ValueError):
            interactive = False
        return cls(stream, enabled=interactive)

    def add_work(self, units: float) -> None:
        """Announce ``units`` more work to do."""
        self._total += units

    def update(self, engine: str, phase: str, point: str, *, done: float = 0.0) -> None:
        """Record ``done`` finished units and show where the sweep is."""
        self._done += done
        if not self.enabled:
            return
        self._at_work[engine] = f"{engine} · {phase} · {point}"
        self._show()

    def finish(self, engine: str) -> None:
        """Take ``engine`` off the status line (its sweep ended)."""
        if self._at_work.pop(engine, None) is not None and self._at_work:
            self._show()

    def _show(self) -> None:
        elapsed = (self._clock_ns() - self._start_ns) / 1e9
        eta = "?"
        if self._done > 0 and self._total > self._done:
            eta = _duration(elapsed / self._done * (self._total - self._done))
        elif self._total and self._done >= self._total:
            eta = "0s"
        line = " | ".join(self._at_work.values()) + f" · ETA {eta}"
        pad = max(0, self._width - len(line))
        self._width = len(line)
        self._stream.write("\r" + line + " " * pad)
        self._stream.flush()

    def warn(self, line: str) -> None:
        """Write ``line`` on its own line, terminal or not, without garbling the status line."""
        self.close()
        self._stream.write(line + "\n")
        self._stream.flush()

    def close(self) -> None:
        """End the status line."""
        if self.enabled and self._width:
            self._stream.write("\n")
            self._stream.flush()
            self._width = 0
