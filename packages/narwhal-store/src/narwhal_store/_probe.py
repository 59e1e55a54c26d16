"""The freshness probe (``narwhal.probe``): how fast each engine runs now against its profile.

A probe re-measures a few of the profile's own points right before a prediction or a trial: some
prefill lengths, a single-stream decode cohort and a mid-concurrency one. Each repeat becomes a
factor, the probe's timing over the profile's at the same point (the median of the profile's raw
samples there, or its fit where the sidecar has none): above 1 the engine is slower than when it
was profiled. Per engine and per phase the factors' median is the drift, with a 5-95 % interval
of that median from the probe's own repeats; past ``threshold`` the engine has drifted.

``predict --calibrate PROBE`` draws each engine's speed from these factors instead of from the
profile sweep's own history; ``check --probe PROBE`` fails an engine that drifted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal, Self

from pydantic import Field, model_validator

from narwhal_store._fields import (
    Generator,
    Iid,
    LocatedValueError,
    PosFloat,
    PosInt,
    Sha256,
    StrictModel,
    Timestamp,
)
from narwhal_store._loading import load_model

__all__ = [
    "PROBE_FORMAT",
    "DriftFactor",
    "EngineDrift",
    "ProbeDocument",
    "ProbePoint",
    "load_probe",
]

PROBE_FORMAT = "narwhal.probe"

Phase = Literal["prefill", "decode"]


class ProbePoint(StrictModel):
    """One re-measured point: the probe's raw timings there and the profile's at the same point."""

    phase: Phase
    input_len: PosInt = Field(description="prompt tokens")
    concurrency: PosInt = Field(description="streams decoding together (1 for prefill)")
    measured_s: Annotated[list[PosFloat], Field(min_length=1)] = Field(
        description="one value per repeat: the TTFT (prefill) or the cohort's TPOT (decode)"
    )
    reference_s: PosFloat = Field(description="the profile's timing at this point")
    reference: Literal["samples", "fit"] = Field(
        description="samples: the median of the profile's raw samples at this point; fit: the "
        "profile's fit (the sidecar held none here)"
    )
    factors: Annotated[list[PosFloat], Field(min_length=1)] = Field(
        description="measured_s over reference_s, one per repeat"
    )

    @model_validator(mode="after")
    def _one_factor_a_repeat(self) -> Self:
        if len(self.factors) != len(self.measured_s):
            raise LocatedValueError(
                "factors", f"{len(self.factors)} factor(s) for {len(self.measured_s)} repeat(s)"
            )
        return self


class DriftFactor(StrictModel):
    """One phase's drift: the median factor and the 5-95 % interval of that median."""

    factor: PosFloat = Field(description="median of every repeat's factor (1: as profiled)")
    low: PosFloat
    high: PosFloat
    repeats: PosInt = Field(description="factors behind it")
    drifted: bool = Field(description="|factor - 1| is past the document's threshold")

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if not self.low <= self.factor <= self.high:
            raise LocatedValueError(
                "factor", f"{self.factor} is not within its interval [{self.low}, {self.high}]"
            )
        return self


class EngineDrift(StrictModel):
    """One engine's probe: its points and the drift of each phase it was probed in."""

    profile_created_at: Timestamp = Field(description="when the compared profile was measured")
    points: Annotated[list[ProbePoint], Field(min_length=1)]
    prefill: DriftFactor | None = Field(description="null when no prefill point was probed")
    decode: DriftFactor | None = Field(description="null when no decode point was probed")
    seconds: float = Field(ge=0, description="how long the engine's probe took (wall clock)")

    @property
    def drifted(self) -> bool:
        """Either phase is past the threshold."""
        return any(d is not None and d.drifted for d in (self.prefill, self.decode))


class ProbeDocument(StrictModel):
    """``{"format": "narwhal.probe", "format_version": 1, ...}``: one probe of a fleet's engines
    against one profile store."""

    format: Literal["narwhal.probe"]
    format_version: Literal[1]
    generator: Generator
    created_at: Timestamp = Field(description="when the probe ended (wall clock)")
    fleet: str = Field(description="the fleet file, as given")
    fleet_sha256: Sha256
    profiles: str = Field(description="the profile store compared against, as given")
    profiles_sha256: Sha256
    threshold: float = Field(gt=0, lt=1, description="the drift past which an engine fails")
    engines: Annotated[dict[Iid, EngineDrift], Field(min_length=1)]

    def drifted(self) -> list[str]:
        """The iids past the threshold, in document order."""
        return [iid for iid, engine in self.engines.items() if engine.drifted]


def load_probe(path: str | Path) -> ProbeDocument:
    """Read and validate a probe document; ``FormatError`` names the file and the JSON path."""
    doc, _ = load_model(path, ProbeDocument)
    return doc
