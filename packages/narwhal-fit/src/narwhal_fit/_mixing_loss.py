"""The mixing loss: the decode time injected prefills cost the streams they ran beside.

:func:`mixing_loss` measures a mixing point's loss per prefill (:class:`MixingLoss`) from the token
times of the decode streams (``StreamTimes``) and the prefills' send and first-token times, against
each stream's quiet pace just before and just after the prefills' stretch. The points it measures
are fitted by :func:`~narwhal_fit.fit_mixing` (``mixing-share-step-v1``, in ``_mixing``).
"""

from __future__ import annotations

import bisect
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from narwhal_fit._errors import InsufficientDataError
from narwhal_fit._inputs import positive_int
from narwhal_fit._window import StreamTimes

__all__ = ["MixingLoss", "mixing_loss"]


@dataclass(frozen=True, slots=True)
class MixingLoss:
    """What injected prefills cost the decode streams they ran beside.

    ``loss_s`` is the point's loss per prefill: the mean over streams of ``stream_loss_s`` divided
    by the number of prefills. Per stream: ``stream_loss_s`` the time its stretch took beyond its
    intervals at ``quiet_s``, ``quiet_s`` its quiet per-token interval (the mean pace just before
    and just after the stretch, inside the window where every stream decodes) and ``intervals``
    the tokens its stretch delivered.
    """

    loss_s: float
    stream_loss_s: tuple[float, ...]
    quiet_s: tuple[float, ...]
    intervals: tuple[int, ...]
    prefills: int


def _pace(times: Sequence[int], lo: int, hi: int) -> float | None:
    """Mean per-token interval (ns) of the stream inside ``[lo, hi]``: from its first arrival in
    there to its last, over the tokens stamped after the first (as :func:`cohort_tpot` counts);
    None when fewer than one interval falls inside."""
    first = bisect.bisect_left(times, lo)
    last = bisect.bisect_right(times, hi) - 1
    if last < first or times[last] == times[first]:
        return None
    tokens = bisect.bisect_right(times, times[last]) - bisect.bisect_right(times, times[first])
    return (times[last] - times[first]) / tokens


def _quiet_pace(
    times: Sequence[int], window_start: int, window_end: int, start: int, end: int
) -> float | None:
    """The stream's quiet per-token interval (ns) around its stretch ``[start, end]``.

    The mean pace over equally long spans just before and just after the stretch, inside the
    window where every stream decodes (each as long as the shorter of the two quiet sides), then
    the mean of the two: their midpoint is the stretch's, so a pace that drifts as the context
    grows averages out. A mean, not a median: the stretch's time is a sum of intervals, and
    intervals read by a client are skewed (a median read 1.20 ms where the mean was 1.38 ms).
    One side alone when the other holds no interval; None when neither does.
    """
    before = max(0, start - window_start)
    after = max(0, window_end - end)
    span = min(before, after) if before and after else max(before, after)
    paces = [
        pace
        for lo, hi in ((start - span, start), (end, end + span))
        if (pace := _pace(times, max(lo, window_start), min(hi, window_end))) is not None
    ]
    return statistics.fmean(paces) if paces else None


def mixing_loss(
    streams: Sequence[StreamTimes], first_send_ns: int, last_first_ns: int, prefills: int
) -> MixingLoss:
    """The decode time ``prefills`` injected prefills cost ``streams`` (token times in ns, one
    clock for streams and prefills), per prefill.

    For each stream: the stretch runs from its last token stamped before ``first_send_ns`` (the
    first prefill's send) to its first token stamped after ``last_first_ns`` (the last prefill's
    first token), so it holds every prefill. The stretch delivered ``k`` tokens (those stamped
    after its start, up to and including its end's arrival, as :func:`cohort_tpot` counts them);
    at the stream's quiet interval ``q`` (its mean per-token pace over equally long spans just
    before and just after the stretch, inside the window where every stream decodes) they take
    ``k·q``, and the rest of the stretch's time is the stream's loss. The point's loss is the mean
    over streams divided by ``prefills``; it may come out slightly negative (noise) for an engine
    that barely slows down.

    :class:`InsufficientDataError` names what is missing: no streams, ``prefills < 1``, the last
    first token before the first send, a stream without a token before the first send or after
    the last prefill's first token (it ended first), or one without a quiet interval.
    """
    if not streams:
        raise InsufficientDataError("a mixing loss needs at least one decode stream")
    count = positive_int(prefills, "prefills")
    if last_first_ns < first_send_ns:
        raise InsufficientDataError(
            f"the last prefill's first token ({last_first_ns} ns) comes before the first "
            f"prefill's send ({first_send_ns} ns)"
        )
    for i, s in enumerate(streams):
        if not s.token_ns:
            raise InsufficientDataError(f"stream {i} has no output tokens")
    window_start = max(s.token_ns[0] for s in streams)
    window_end = min(s.token_ns[-1] for s in streams)
    losses: list[float] = []
    quiet: list[float] = []
    intervals: list[int] = []
    for i, s in enumerate(streams):
        times = s.token_ns
        before = bisect.bisect_left(times, first_send_ns) - 1
        if before < 0:
            raise InsufficientDataError(
                f"stream {i} has no token before the first prefill was sent (its first token "
                f"came {(times[0] - first_send_ns) / 1e6:.1f} ms after it)"
            )
        after = bisect.bisect_right(times, last_first_ns)
        if after >= len(times):
            raise InsufficientDataError(
                f"stream {i} ended before the last prefill's first token (its last token came "
                f"{(last_first_ns - times[-1]) / 1e6:.1f} ms before it)"
            )
        start, end = times[before], times[after]
        k = bisect.bisect_right(times, end) - bisect.bisect_right(times, start)
        q = _quiet_pace(times, window_start, window_end, start, end)
        if q is None:
            raise InsufficientDataError(
                f"stream {i} has no token interval outside the prefills' stretch while every "
                "stream decodes, so its quiet pace is unknown"
            )
        losses.append((end - start - k * q) / 1e9)
        quiet.append(q / 1e9)
        intervals.append(k)
    return MixingLoss(
        loss_s=statistics.fmean(losses) / count,
        stream_loss_s=tuple(losses),
        quiet_s=tuple(quiet),
        intervals=tuple(intervals),
        prefills=count,
    )
