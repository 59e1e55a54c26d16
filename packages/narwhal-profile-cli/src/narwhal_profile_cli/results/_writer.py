"""Each finished engine of a live sweep: shaped into documents and written, one write at a time.

The store and sidecar are written when the first engine completes and rewritten after each later
one (every engine finished so far, in fleet order), so an abort or an interrupt keeps every
finished profile. The CPU work (documents, JSON, fsync) runs in a worker thread, so the streams of
the groups still at work keep being read while a store is written.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from narwhal_profile_cli._errors import ProfileError, ProfileUsageError
from narwhal_profile_cli._options import ScaleOut, SweepOptions
from narwhal_profile_cli.results._assemble import EngineMeasurement, Measured, assemble, documents
from narwhal_profile_cli.results._quality import decode_warnings
from narwhal_profile_cli.sweeps._colocation import ColocationPlan
from narwhal_store import DestinationError, LoadedFleet, StoreError, write_store


@dataclass(slots=True)
class LiveState:
    """What the sweep has written so far (read after an abort or an interrupt).

    ``measured`` is in the order engines finished; the first ``written`` of them are on disk at
    ``path`` (``profiles.path``, or a shard's own store).
    """

    path: Path | None = None
    written: int = 0
    measured: list[Measured] = field(default_factory=list)
    order: dict[str, int] = field(default_factory=dict)
    interrupted: bool = False  # Ctrl-C seen (set by the command's signal handler)

    def in_fleet_order(self, measured: Sequence[Measured]) -> list[Measured]:
        """``measured`` sorted as the fleet file lists the engines."""
        return sorted(measured, key=lambda m: self.order.get(m.profile.key.engine, 0))

    def kept(self) -> list[Measured]:
        """The profiles on disk, in fleet order."""
        return self.in_fleet_order(self.measured[: self.written])


class StoreWriter:
    """Shapes each finished engine and rewrites the store, one write at a time, off the loop.

    The CPU work (documents, JSON, fsync) runs in a worker thread, so the streams of the groups
    still at work keep being read while a store is written.
    """

    def __init__(
        self,
        fleet: LoadedFleet,
        path: Path,
        state: LiveState,
        overwrite: bool,
        sweep: SweepOptions,
        scale: ScaleOut,
        colocations: dict[str, ColocationPlan],
    ) -> None:
        self._fleet = fleet
        self._path = path
        self._state = state
        self._overwrite = overwrite
        self._sweep = sweep
        self._scale = scale
        self._colocations = colocations
        self._lock = asyncio.Lock()

    async def add(self, measurement: EngineMeasurement) -> list[str]:
        """Write ``measurement`` with every engine finished before it; returns its warnings."""
        async with self._lock:
            return await asyncio.to_thread(self._write, measurement)

    def _write(self, measurement: EngineMeasurement) -> list[str]:
        fleet, state, sweep = self._fleet, self._state, self._sweep
        iid = measurement.plan.entry.iid
        lines = []
        left_out = [c for c in measurement.cohorts if c.point is None]
        if left_out:
            lines.append(
                f"{iid}: {len(left_out)} decode point(s) left out of the fit: "
                + "; ".join(f"input {c.input_len} x {c.concurrency}: {c.reason}" for c in left_out)
            )
        measured = assemble(
            fleet,
            measurement,
            parallel_groups=self._scale.parallel_groups or 1,
            shard=None if self._scale.shard is None else self._scale.shard.label(),
        )
        state.measured.append(measured)
        lines.extend(
            decode_warnings(
                iid,
                measured.profile.decode_fit,
                measurement.cohorts,
                decode_tokens=sweep.decode_tokens,
                colocated=iid in self._colocations,
            )
        )
        if measurement.mixing is not None:
            lines.extend(measurement.mixing.warnings(iid))
        store, sidecar = documents(fleet, state.in_fleet_order(state.measured))
        mode: Literal["fresh", "replace"] = (
            "replace" if self._overwrite or state.written > 0 else "fresh"
        )
        try:
            write_store(self._path, store, sidecar, mode=mode)
        except DestinationError as exc:  # e.g. created or replaced by a symlink meanwhile
            raise ProfileUsageError(f"{exc}", code="destination") from exc
        except StoreError as exc:
            raise ProfileError(f"cannot write {self._path}: {exc}", code="write_failed") from exc
        state.written = len(state.measured)
        return lines
