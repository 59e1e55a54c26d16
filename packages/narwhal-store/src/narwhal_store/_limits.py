"""The limits file (``narwhal.limits``, docs/design.md §3): per-engine scheduler settings the
operator gives: ``max_num_seqs`` (the sweep's and the predictor's cap on running sequences) and,
where the engine does not show them, ``max_num_batched_tokens`` and ``enable_chunked_prefill``
(recorded in the profile with source ``limits``)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal, Self

from pydantic import model_validator

from narwhal_store._errors import FormatError
from narwhal_store._fields import Iid, PosInt, StrictModel
from narwhal_store._fleet import FleetConfig, LoadedFleet, fleet_config
from narwhal_store._loading import json_path, load_model

__all__ = ["EngineLimits", "LimitsFile", "load_limits"]


class EngineLimits(StrictModel):
    """Generated limits of one engine (at least one setting)."""

    max_num_seqs: PosInt | None = None
    max_num_batched_tokens: PosInt | None = None
    enable_chunked_prefill: bool | None = None

    @model_validator(mode="after")
    def _some(self) -> Self:
        if (
            self.max_num_seqs is None
            and self.max_num_batched_tokens is None
            and self.enable_chunked_prefill is None
        ):
            raise ValueError(
                "an engine's limits need at least one of max_num_seqs, max_num_batched_tokens, "
                "enable_chunked_prefill"
            )
        return self


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
