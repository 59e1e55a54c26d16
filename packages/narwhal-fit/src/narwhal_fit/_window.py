"""Decode-window helpers: the overlap window of a cohort and its TPOT, counting tokens.

Definitions (docs/design.md §4):

* A stream's token times are one timestamp (integer nanoseconds, any monotonic clock shared by
  the cohort) per output token, non-decreasing. A chunk that carried k tokens contributes its
  arrival time k times (:func:`expand_chunks`).
* The window runs from the last stream's first token to the first stream's last token:
  ``start_ns = max(first token)``, ``end_ns = min(last token)``. Inside it all streams decode.
* A token is inside the window when ``start_ns <= t <= end_ns`` (both ends inclusive). For a
  stream, the span is ``t_last_in_window - t_first_in_window`` and the tokens that span delivered
  are the in-window tokens stamped *after* ``t_first_in_window`` (k of them; k = m - 1 when every
  chunk carries one token). The stream's mean inter-token interval is ``span / k``. Counting the
  tokens that share the first in-window timestamp would bias TPOT low when chunks carry several
  tokens (two tokens every 10 ms would read 50/11 ms instead of 5 ms).
* The output position of a stream's token is its 0-based index in the stream (the first output
  token is position 0), so the context a decode step sees is input tokens + position.
"""

from __future__ import annotations

import bisect
import numbers
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from narwhal_fit._decode import DecodePoint
from narwhal_fit._errors import InsufficientDataError, NeedsMoreTokensError
from narwhal_fit._inputs import positive_int

__all__ = [
    "CohortTpot",
    "DecodeWindow",
    "StreamTimes",
    "cohort_tpot",
    "decode_window",
    "expand_chunks",
]

_MIN_INTERVALS = 2


def _as_int(value: object, what: str) -> int:
    if type(value) is int:  # the common case, without the ABC check below
        return value
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InsufficientDataError(f"{what} must be an integer nanosecond time, got {value!r}")
    return int(value)


@dataclass(frozen=True, slots=True)
class StreamTimes:
    """One stream's output-token arrival times in ns: one entry per token, non-decreasing."""

    token_ns: Sequence[int]

    def __post_init__(self) -> None:
        times = tuple(_as_int(t, f"token_ns[{i}]") for i, t in enumerate(self.token_ns))
        for i in range(1, len(times)):
            if times[i] < times[i - 1]:
                raise InsufficientDataError(
                    f"token_ns must be non-decreasing: token {i} at {times[i]} ns comes before "
                    f"token {i - 1} at {times[i - 1]} ns"
                )
        object.__setattr__(self, "token_ns", times)

    @classmethod
    def from_chunks(cls, chunk_ns: Sequence[int], chunk_tokens: Sequence[int]) -> StreamTimes:
        """Build from chunk arrival times and the token count each chunk carried."""
        return cls(expand_chunks(chunk_ns, chunk_tokens))


def expand_chunks(chunk_ns: Sequence[int], chunk_tokens: Sequence[int]) -> list[int]:
    """Repeat each chunk's arrival time once per token it carried (a 0-token chunk adds nothing)."""
    if len(chunk_ns) != len(chunk_tokens):
        raise InsufficientDataError(
            f"got {len(chunk_ns)} chunk times but {len(chunk_tokens)} token counts"
        )
    out: list[int] = []
    for i, (t, k) in enumerate(zip(chunk_ns, chunk_tokens, strict=True)):
        time_ns = _as_int(t, f"chunk_ns[{i}]")
        count: object = k  # typed int, but checked: callers pass what they measured
        if isinstance(count, bool) or not isinstance(count, numbers.Integral) or count < 0:
            raise InsufficientDataError(f"chunk_tokens[{i}] must be an integer >= 0, got {k!r}")
        out.extend([time_ns] * int(count))
    return out


@dataclass(frozen=True, slots=True)
class DecodeWindow:
    """The overlap window in ns; ``start_ns > end_ns`` means the streams never all overlapped."""

    start_ns: int
    end_ns: int

    @property
    def duration_ns(self) -> int:
        """``end_ns - start_ns`` (negative when the streams do not overlap)."""
        return self.end_ns - self.start_ns

    @property
    def overlaps(self) -> bool:
        """True when some instant has every stream decoding (``start_ns <= end_ns``)."""
        return self.start_ns <= self.end_ns


def decode_window(streams: Sequence[StreamTimes]) -> DecodeWindow:
    """Window from the last stream's first token to the first stream's last token."""
    if not streams:
        raise InsufficientDataError("a decode window needs at least one stream")
    for i, s in enumerate(streams):
        if not s.token_ns:
            raise InsufficientDataError(f"stream {i} has no output tokens")
    return DecodeWindow(
        start_ns=max(s.token_ns[0] for s in streams),
        end_ns=min(s.token_ns[-1] for s in streams),
    )


@dataclass(frozen=True, slots=True)
class CohortTpot:
    """TPOT of one cohort measured inside its window.

    ``tpot_s`` is the median over streams of ``per_stream`` (each stream's mean inter-token
    interval in seconds). ``tokens_in_window`` counts each stream's tokens inside the window;
    ``intervals_per_stream`` is the smallest interval count (>= 2). ``mean_output_position`` is
    the mean over streams of the mean 0-based output position of their in-window tokens.
    """

    tpot_s: float
    per_stream: tuple[float, ...]
    tokens_in_window: tuple[int, ...]
    intervals_per_stream: int
    mean_output_position: float
    concurrency: int

    def decode_point(self, input_len: int) -> DecodePoint:
        """The fit point: ``ctx = input_len + mean_output_position``, concurrency = streams."""
        length = positive_int(input_len, "input_len")
        return DecodePoint(
            concurrency=self.concurrency,
            ctx=length + self.mean_output_position,
            tpot_s=self.tpot_s,
            input_len=length,
        )


def cohort_tpot(streams: Sequence[StreamTimes], window: DecodeWindow) -> CohortTpot:
    """Median over streams of each stream's mean inter-token interval inside ``window``.

    Counts tokens, not chunks (see the module docstring). Raises :class:`NeedsMoreTokensError`
    when any stream has fewer than two tokens delivered inside the window after its first
    in-window instant; the message says to raise ``--decode-tokens``.
    """
    if not streams:
        raise InsufficientDataError("a cohort needs at least one stream")
    counts: list[int] = []
    spans: list[int] = []
    positions: list[float] = []
    intervals: list[int] = []
    for s in streams:
        times = s.token_ns
        lo = bisect.bisect_left(times, window.start_ns)
        hi = bisect.bisect_right(times, window.end_ns)
        m = max(hi - lo, 0)
        counts.append(m)
        spans.append(times[hi - 1] - times[lo] if m > 0 else 0)
        positions.append((lo + hi - 1) / 2.0 if m > 0 else 0.0)
        intervals.append(hi - bisect.bisect_right(times, times[lo]) if m > 0 else 0)
    lengths = tuple(len(s.token_ns) for s in streams)
    worst = min(range(len(streams)), key=intervals.__getitem__)
    if intervals[worst] < _MIN_INTERVALS:
        if window.overlaps:
            span = f"window {window.duration_ns / 1e6:.3f} ms"
        else:
            span = f"no overlap: the last first token came {-window.duration_ns / 1e6:.3f} ms "
            span += "after the first last token"
        raise NeedsMoreTokensError(
            f"decode window holds {intervals[worst]} inter-token interval(s) for stream {worst} "
            f"of {len(streams)} (needs at least {_MIN_INTERVALS}; streams have "
            f"{min(lengths)}-{max(lengths)} output tokens; {span}); "
            "raise --decode-tokens so the streams overlap longer",
            min_intervals=intervals[worst],
            stream_index=worst,
            streams=len(streams),
            tokens_per_stream=lengths,
        )
    per_stream = tuple(span / k / 1e9 for span, k in zip(spans, intervals, strict=True))
    return CohortTpot(
        tpot_s=float(statistics.median(per_stream)),
        per_stream=per_stream,
        tokens_in_window=tuple(counts),
        intervals_per_stream=min(intervals),
        mean_output_position=statistics.fmean(positions),
        concurrency=len(streams),
    )
