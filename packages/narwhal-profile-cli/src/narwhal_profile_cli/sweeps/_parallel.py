"""``--parallel-groups N``: run one worker per GPU group, at most N at once.

A group's worker measures its engines one at a time, so two engines of one group are never in
flight together. The first failure stops the other groups (their tasks are cancelled, which
closes their streams and neighbour traffic) and is re-raised with a note naming them; Ctrl-C
cancels every group the same way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

from narwhal_profile_cli._errors import ProfileError
from narwhal_profile_cli.sweeps._groups import GroupUnit


async def run_groups(
    units: Sequence[GroupUnit],
    worker: Callable[[GroupUnit], Awaitable[None]],
    limit: int,
    *,
    kept: Callable[[], str],
) -> None:
    """Run ``worker`` for every unit, at most ``limit`` at once, in fleet order of admission.

    ``kept`` describes what is written so far; it ends the message of a failure that stopped
    other groups.
    """
    if limit <= 1 or len(units) <= 1:
        for unit in units:
            await worker(unit)
        return
    slots = asyncio.Semaphore(limit)
    started: set[int] = set()

    async def one(index: int, unit: GroupUnit) -> None:
        async with slots:
            started.add(index)
            await worker(unit)

    tasks = [asyncio.create_task(one(i, unit), name=unit.label()) for i, unit in enumerate(units)]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    finally:  # an interrupt cancels us here: stop every group before unwinding
        pending = [t for t in tasks if not t.done()]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
    failed = next((t for t in tasks if not t.cancelled() and t.exception() is not None), None)
    if failed is None:
        return
    exc = failed.exception()
    assert exc is not None
    stopped = [u.label() for i, u in enumerate(units) if i in started and tasks[i] in pending]
    skipped = [u.label() for i, u in enumerate(units) if i not in started]
    if not isinstance(exc, ProfileError) or not (stopped or skipped):
        raise exc
    notes = []
    if stopped:
        notes.append(f"stopped {', '.join(stopped)} mid-sweep (their current engines not written)")
    if skipped:
        notes.append(f"did not start {', '.join(skipped)}")
    raise type(exc)(
        f"{exc.message}; {'; '.join(notes)}; {kept()}", engine=exc.engine, code=exc.code
    ) from exc
