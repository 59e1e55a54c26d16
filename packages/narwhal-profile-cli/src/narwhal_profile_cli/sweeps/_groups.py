"""GPU groups: the unit ``--parallel-groups`` measures side by side and ``--shard`` splits.

Engines of one ``shared_device.group`` share a GPU, so they are always measured one at a time
and never split between shards; an engine without a group is a group of its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from narwhal_profile_cli._errors import ProfileUsageError
from narwhal_profile_cli._options import Shard
from narwhal_store import EngineEntry


@dataclass(frozen=True, slots=True)
class GroupUnit:
    """One GPU group (or a lone engine) and its engines, in fleet order."""

    name: str
    grouped: bool
    engines: tuple[EngineEntry, ...]

    def label(self) -> str:
        """``group g0`` or ``engine e0`` (a lone engine)."""
        return f"group {self.name}" if self.grouped else f"engine {self.name}"


def group_units(engines: Sequence[EngineEntry]) -> list[GroupUnit]:
    """The engines' groups, in the fleet order of each group's first engine."""
    members: dict[tuple[bool, str], list[EngineEntry]] = {}
    for entry in engines:
        group = entry.gpu_group
        key = (True, group) if group is not None else (False, entry.iid)
        members.setdefault(key, []).append(entry)
    return [GroupUnit(name, grouped, tuple(es)) for (grouped, name), es in members.items()]


def shard_units(units: Sequence[GroupUnit], shard: Shard) -> list[GroupUnit]:
    """Share ``shard.index`` of ``shard.count``: whole groups, balanced by engine count.

    Deterministic from the fleet alone: groups are dealt largest first (ties by name) to the
    shard holding the fewest engines so far (ties to the lower index). Every process given the
    same fleet computes the same split, so the M shards cover every group exactly once. With
    more shards than groups, the i-th group dealt goes to shard i and the rest stay empty, so
    only the first ``len(units)`` shards are dealt to (a huge M costs nothing).
    """
    loads = [0] * min(shard.count, len(units))
    owner: dict[tuple[bool, str], int] = {}
    for unit in sorted(units, key=lambda u: (-len(u.engines), u.name, u.grouped)):
        target = min(range(len(loads)), key=lambda i: (loads[i], i))
        owner[(unit.grouped, unit.name)] = target
        loads[target] += len(unit.engines)
    mine = [u for u in units if owner[(u.grouped, u.name)] == shard.index - 1]
    if not mine:
        raise ProfileUsageError(
            f"{shard.option()}: the fleet has only {len(units)} GPU group(s) "
            f"(lone engines included), so share {shard.index} of {shard.count} is empty"
        )
    return mine


def shard_store_path(path: Path, shard: Shard | None) -> Path:
    """``profiles.path``, or with ``--shard K/M`` its ``NAME.shard-K-of-M.json`` sibling."""
    if shard is None:
        return path
    return path.with_name(f"{path.stem}.shard-{shard.index}-of-{shard.count}{path.suffix}")
