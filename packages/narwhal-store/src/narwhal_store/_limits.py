"""The limits file (``narwhal.limits``, docs/design.md §3): per-engine ``max_num_seqs``."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from narwhal_store._errors import FormatError
from narwhal_store._fields import Iid, PosInt, StrictModel
from narwhal_store._fleet import FleetConfig, LoadedFleet, fleet_config
from narwhal_store._loading import json_path, load_model

__all__ = ["EngineLimits", "LimitsFile", "load_limits"]


class EngineLimits(StrictModel):
    """Generated limits of one engine."""

    max_num_seqs: PosInt


class LimitsFile(StrictModel):
    """``{"format": "narwhal.limits", "format_version": 1, "engines": {"<iid>": {...}}}``."""

    format: Literal["narwhal.limits"]
    format_version: Literal[1]
    engines: dict[Iid, EngineLimits]


def load_limits(path: str | Path, fleet: FleetConfig | LoadedFleet) -> LimitsFile:
    """Read and validate a limits file; an iid that is not in ``fleet`` is a ``FormatError``."""
    limits, _ = load_model(path, LimitsFile)
    known = set(fleet_config(fleet).iids())
    for iid in limits.engines:
        if iid not in known:
            raise FormatError(
                path,
                json_path(("engines", iid)),
                f"engine {iid!r} is not in the fleet (fleet engines: {', '.join(sorted(known))})",
            )
    return limits
