"""``--colocated``: which peers load each target, and the load around the target's measurement.

The traffic itself lives in ``_neighbours``; this module probes each peer once (health, model, live
``max_model_len``, token pool), checks the neighbour token counts fit, and wraps the load so that a
solo sweep uses the same code path with no traffic.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass

from narwhal_engine_client import EngineClient
from narwhal_profile_cli.sweeps._neighbours import (
    Neighbour,
    NeighbourLoad,
    NeighbourSettings,
    check_neighbour_fit,
    check_neighbours,
)
from narwhal_profile_cli.sweeps._preflight import EngineProbe, probe_engine
from narwhal_store import EngineEntry, LoadedFleet, NeighbourRecord


@dataclass(frozen=True, slots=True)
class ColocationPlan:
    """The neighbours of one target and the traffic settings."""

    neighbours: tuple[Neighbour, ...]
    settings: NeighbourSettings


def _peers(fleet: LoadedFleet, target: EngineEntry) -> list[EngineEntry]:
    group = target.gpu_group
    if group is None:
        return []
    return [e for e in fleet.config.engines if e.gpu_group == group and e.iid != target.iid]


async def plan_colocation(
    fleet: LoadedFleet,
    targets: Sequence[EngineEntry],
    clients: Mapping[str, EngineClient],
    settings: NeighbourSettings,
) -> dict[str, ColocationPlan]:
    """Probe every peer of every target (once each) and check the neighbour token counts fit.

    A target without peers in a shared GPU group is measured without neighbour traffic (its profile
    records no colocation).
    """
    probes: dict[str, EngineProbe] = {}
    plans: dict[str, ColocationPlan] = {}
    for target in targets:
        neighbours: list[Neighbour] = []
        for peer in _peers(fleet, target):
            if peer.iid not in probes:
                probes[peer.iid] = await probe_engine(peer, clients[peer.iid])
            probe = probes[peer.iid]
            neighbours.append(
                Neighbour(
                    iid=peer.iid,
                    role=peer.role,
                    client=probe.client,
                    model=probe.model,
                    max_model_len=probe.max_model_len,
                    pool=probe.pool,
                    counting=probe.counting,
                )
            )
        if neighbours:
            check_neighbour_fit(neighbours, settings)
            plans[target.iid] = ColocationPlan(tuple(neighbours), settings)
    return plans


class TargetInterval:
    """The handle a sweep uses: ``mark()`` opens the measured interval, ``finish()`` closes it."""

    def __init__(self, load: NeighbourLoad | None) -> None:
        self._load = load

    def mark(self) -> None:
        """The target's measurement starts now."""
        if self._load is not None:
            self._load.mark()

    def finish(self) -> list[NeighbourRecord]:
        """Each neighbour's record for the interval; a stalled or failed neighbour aborts."""
        if self._load is None:
            return []
        records = self._load.records_since_mark()
        check_neighbours(records)
        return records


@contextlib.asynccontextmanager
async def neighbour_load(
    plan: ColocationPlan | None, *, seed: int, clock_ns: Callable[[], int]
) -> AsyncIterator[TargetInterval]:
    """Neighbour traffic for the duration of the block (none when ``plan`` is None)."""
    if plan is None:
        yield TargetInterval(None)
        return
    async with NeighbourLoad(plan.neighbours, plan.settings, seed=seed, clock_ns=clock_ns) as load:
        yield TargetInterval(load)
