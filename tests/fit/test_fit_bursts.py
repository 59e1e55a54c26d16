"""burst_share: chunk intervals far shorter than their tokens take at the stream's pace."""

from __future__ import annotations

import pytest

from narwhal_fit import DecodeWindow, InsufficientDataError, burst_share

MS = 1_000_000
WIDE = DecodeWindow(0, 10**12)


def test_regular_chunks_of_several_tokens_are_not_bursts() -> None:
    """--stream-interval 4: a 4-token chunk every 20 ms at 5 ms per token."""
    times = [i * 20 * MS for i in range(10)]
    assert burst_share([(times, [4] * 10)], WIDE, [0.005]) == 0.0


def test_chunks_flushed_together_are_bursts() -> None:
    """Three one-token chunks every 15 ms, the last two of each 20 us after the first."""
    times, tokens = [], []
    for step in range(5):
        base = step * 15 * MS
        times += [base, base + 20_000, base + 40_000]
        tokens += [1, 1, 1]
    share = burst_share([(times, tokens)], WIDE, [0.005])
    assert share == pytest.approx(10 / 14)  # 2 bursts per flush; 4 regular gaps between flushes


def test_only_intervals_inside_the_window_count() -> None:
    times = [0, 10, 5 * MS, 10 * MS]  # a burst at the start, outside the window
    assert burst_share([(times, [1, 1, 1, 1])], DecodeWindow(5 * MS, 10 * MS), [0.005]) == 0.0


def test_zero_token_chunks_are_skipped_and_no_interval_gives_zero() -> None:
    assert burst_share([([0, 1, 2], [1, 0, 0])], WIDE, [0.005]) == 0.0


def test_one_pace_per_stream() -> None:
    with pytest.raises(InsufficientDataError, match="2 streams but 1 per-token"):
        burst_share([([0], [1]), ([0], [1])], WIDE, [0.005])
