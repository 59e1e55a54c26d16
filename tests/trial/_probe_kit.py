"""Hand-made freshness probes (``narwhal.probe``) for the trial's tests."""

from __future__ import annotations

import statistics
from pathlib import Path

import orjson

from narwhal_store import (
    DriftFactor,
    EngineDrift,
    Generator,
    ProbeDocument,
    ProbePoint,
    load_fleet,
    read_store,
    write_file_atomic,
)

CREATED_AT = "2026-12-07T03:00:00+00:00"


def drift(factors: list[float], threshold: float) -> DriftFactor:
    """The median factor, its interval the factors' range (a stand-in for the bootstrap's)."""
    middle = statistics.median(factors)
    return DriftFactor(
        factor=middle,
        low=min(factors),
        high=max(factors),
        repeats=len(factors),
        drifted=abs(middle - 1) > threshold,
    )


def write_probe(
    out: Path,
    fleet: Path,
    store: Path,
    factors: dict[str, tuple[list[float], list[float]]],
    *,
    threshold: float = 0.1,
) -> Path:
    """A probe of ``store`` whose engines measured ``factors`` (per iid: prefill's, decode's; an
    empty list: the phase was not probed); the reference timings are nominal."""
    engines = {}
    for iid, (prefill, decode) in factors.items():
        points = [
            ProbePoint(
                phase=phase,
                input_len=128,
                concurrency=concurrency,
                measured_s=[0.01 * f for f in values],
                reference_s=0.01,
                reference="samples",
                factors=list(values),
            )
            for phase, concurrency, values in (("prefill", 1, prefill), ("decode", 4, decode))
            if values
        ]
        engines[iid] = EngineDrift(
            profile_created_at=CREATED_AT,
            points=points,
            prefill=drift(prefill, threshold) if prefill else None,
            decode=drift(decode, threshold) if decode else None,
            seconds=1.0,
        )
    doc = ProbeDocument(
        format="narwhal.probe",
        format_version=1,
        generator=Generator(name="tests", version="0"),
        created_at=CREATED_AT,
        fleet=str(fleet),
        fleet_sha256=load_fleet(fleet).sha256,
        profiles=str(store),
        profiles_sha256=read_store(store).sha256,
        threshold=threshold,
        engines=engines,
    )
    write_file_atomic(out, orjson.dumps(doc.model_dump(mode="json"), option=orjson.OPT_INDENT_2))
    return out
