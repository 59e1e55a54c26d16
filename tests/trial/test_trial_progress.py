"""The run's status line: counts and schedule time left, only on a terminal."""

from __future__ import annotations

import asyncio
import io

from narwhal_trial.run._progress import RunProgress


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _progress(stream: io.StringIO, now_ns: list[int]) -> RunProgress:
    return RunProgress(
        stream,
        requests=200,
        rate=0.5,
        t0_ns=1_000_000_000,
        clock=lambda: now_ns[0],
        in_flight=lambda: 3,
        finished=lambda: 7,
        interval_s=0.01,
    )


def test_line_counts_offers_due_so_far_and_time_left() -> None:
    """At t0 + 20 s at 0.5/s, offers 0..10 are due; the schedule ends 398 s after t0."""
    now = [1_000_000_000 + 20_000_000_000]
    line = _progress(_Terminal(), now).line()
    assert line == "offered 11/200 · finished 7 · in flight 3 · schedule ends in 378 s"


async def test_writes_only_to_a_terminal() -> None:
    """A terminal gets rewritten status lines and a final newline; a pipe gets nothing."""
    now = [1_000_000_000]
    terminal, pipe = _Terminal(), io.StringIO()
    shown, silent = _progress(terminal, now), _progress(pipe, now)
    for progress in (shown, silent):
        progress.start()
    await asyncio.sleep(0.05)
    for progress in (shown, silent):
        await progress.stop()
    assert terminal.getvalue().startswith("\roffered 1/200")
    assert terminal.getvalue().endswith("\n")
    assert pipe.getvalue() == ""
