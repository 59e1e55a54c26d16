"""Decode-window helpers: the overlap window, cohort TPOT counting tokens, needs-more-tokens."""

from __future__ import annotations

import numpy as np
import pytest

from narwhal_fit import (
    DecodeWindow,
    FitConvergenceError,
    FitError,
    InsufficientDataError,
    NeedsMoreTokensError,
    StreamTimes,
    cohort_tpot,
    decode_window,
    expand_chunks,
)

MS = 1_000_000


def _regular(start_ms: float, step_ms: float, tokens: int) -> StreamTimes:
    return StreamTimes([round((start_ms + i * step_ms) * MS) for i in range(tokens)])


def test_error_tree() -> None:
    """Every library error derives from FitError; the two builtin mixins hold."""
    assert issubclass(InsufficientDataError, ValueError)
    assert issubclass(FitConvergenceError, RuntimeError)
    for cls in (InsufficientDataError, FitConvergenceError, NeedsMoreTokensError):
        assert issubclass(cls, FitError)


def test_expand_chunks() -> None:
    """Each chunk's time is repeated once per token; zero-token chunks add nothing."""
    assert expand_chunks([10, 20, 30, 40], [1, 3, 0, 2]) == [10, 20, 20, 20, 40, 40]
    assert StreamTimes.from_chunks([10, 20], [2, 1]).token_ns == (10, 10, 20)


def test_expand_chunks_refuses_bad_input() -> None:
    """Mismatched lists and negative or non-integer counts are refused."""
    with pytest.raises(InsufficientDataError, match="2 chunk times but 1 token counts"):
        expand_chunks([1, 2], [1])
    with pytest.raises(InsufficientDataError, match=r"chunk_tokens\[1\]"):
        expand_chunks([1, 2], [1, -1])
    with pytest.raises(InsufficientDataError, match=r"chunk_tokens\[0\]"):
        expand_chunks([1], [1.5])  # type: ignore[list-item]


def test_stream_times_validation() -> None:
    """Times must be non-decreasing integers; numpy integers are accepted and stored as a tuple."""
    s = StreamTimes(np.array([1, 2, 2, 5], dtype=np.int64).tolist())
    assert s.token_ns == (1, 2, 2, 5)
    numpy_ints = [np.int64(3), np.int64(4)]
    assert StreamTimes(numpy_ints).token_ns == (3, 4)  # type: ignore[arg-type]  # runtime accepts numpy ints
    with pytest.raises(InsufficientDataError, match="non-decreasing: token 2"):
        StreamTimes([1, 5, 4])
    with pytest.raises(InsufficientDataError, match=r"token_ns\[0\]"):
        StreamTimes([1.5])  # type: ignore[list-item]


def test_decode_window_bounds() -> None:
    """The window runs from the latest first token to the earliest last token."""
    streams = [_regular(0, 5, 20), _regular(12, 5, 20), _regular(3, 6, 10)]
    window = decode_window(streams)
    assert window == DecodeWindow(start_ns=12 * MS, end_ns=57 * MS)
    assert window.duration_ns == 45 * MS
    assert window.overlaps


def test_decode_window_refuses_empty() -> None:
    """No streams, or a stream without tokens, is refused."""
    with pytest.raises(InsufficientDataError, match="at least one stream"):
        decode_window([])
    with pytest.raises(InsufficientDataError, match="stream 1 has no output tokens"):
        decode_window([_regular(0, 5, 3), StreamTimes([])])


def test_cohort_tpot_median_over_streams() -> None:
    """Each stream's mean interval inside the window; the cohort TPOT is their median."""
    streams = [_regular(0, 4, 200), _regular(1, 5, 200), _regular(2, 6, 200)]
    window = decode_window(streams)
    cohort = cohort_tpot(streams, window)
    assert cohort.per_stream == pytest.approx((0.004, 0.005, 0.006))
    assert cohort.tpot_s == pytest.approx(0.005)
    assert cohort.concurrency == 3
    assert cohort.intervals_per_stream == min(cohort.tokens_in_window) - 1


def test_cohort_tpot_counts_tokens_not_chunks() -> None:
    """Tokens of one chunk share a time; the span is divided by the tokens delivered after it."""
    # Stream A: chunks of 2 tokens every 10 ms; stream B: one token every 5 ms.
    a = StreamTimes.from_chunks([t * 10 * MS for t in range(6)], [2] * 6)
    b = _regular(0, 5, 11)
    window = decode_window([a, b])
    assert window == DecodeWindow(start_ns=0, end_ns=50 * MS)
    cohort = cohort_tpot([a, b], window)
    assert cohort.tokens_in_window == (12, 11)
    # A: 50 ms delivered 10 tokens after the first instant (5 ms each, not 50/11); B: 50 ms / 10.
    assert cohort.per_stream == pytest.approx((0.005, 0.005))


def test_window_edges_inclusive_and_positions() -> None:
    """Tokens at the window edges count; positions are 0-based output indices."""
    early = _regular(0, 10, 6)  # tokens at 0..50 ms
    late = _regular(20, 10, 6)  # tokens at 20..70 ms
    window = decode_window([early, late])
    assert window == DecodeWindow(start_ns=20 * MS, end_ns=50 * MS)
    cohort = cohort_tpot([early, late], window)
    assert cohort.tokens_in_window == (4, 4)
    # early: positions 2..5 (mean 3.5); late: positions 0..3 (mean 1.5).
    assert cohort.mean_output_position == pytest.approx(2.5)
    point = cohort.decode_point(4096)
    assert point.concurrency == 2
    assert point.ctx == pytest.approx(4098.5)
    assert point.tpot_s == pytest.approx(0.010)
    assert point.input_len == 4096


def test_needs_more_tokens_when_window_short() -> None:
    """A window with fewer than two intervals for a stream asks for more --decode-tokens."""
    streams = [_regular(0, 10, 8), _regular(55, 10, 8)]  # overlap 55..70 ms
    window = decode_window(streams)
    with pytest.raises(NeedsMoreTokensError, match="raise --decode-tokens") as info:
        cohort_tpot(streams, window)
    err = info.value
    assert err.min_intervals == 1
    assert err.stream_index == 0
    assert err.streams == 2
    assert err.tokens_per_stream == (8, 8)
    assert "1 inter-token interval(s) for stream 0 of 2" in str(err)


def test_needs_more_tokens_when_streams_do_not_overlap() -> None:
    """Streams that never decode together report no overlap."""
    streams = [_regular(0, 10, 5), _regular(100, 10, 5)]
    window = decode_window(streams)
    assert not window.overlaps
    with pytest.raises(NeedsMoreTokensError, match=r"no overlap.*raise --decode-tokens"):
        cohort_tpot(streams, window)


def test_needs_more_tokens_when_window_tokens_share_one_instant() -> None:
    """Three tokens of one chunk alone in the window give no measurable time."""
    a = StreamTimes.from_chunks([0, 10 * MS, 20 * MS], [1, 3, 1])
    b = StreamTimes([10 * MS] * 3)
    window = decode_window([a, b])
    with pytest.raises(NeedsMoreTokensError, match="0 inter-token interval"):
        cohort_tpot([a, b], window)
