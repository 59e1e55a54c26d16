"""The freshness probe on screen: one line per engine on stdout, one stderr line per engine that
drifted, and the figures the JSON result carries (``--verify``, docs/design.md §18)."""

from __future__ import annotations

from typing import Any

from narwhal_store import DriftFactor, EngineDrift, ProbeDocument


def _phases(drift: EngineDrift) -> list[tuple[str, DriftFactor]]:
    return [(name, d) for name, d in (("prefill", drift.prefill), ("decode", drift.decode)) if d]


def _percent(threshold: float) -> str:
    return f"{threshold * 100:g} %"


def engine_line(iid: str, drift: EngineDrift) -> str:
    """``sim-0: prefill 1.02x (0.99-1.05), decode 0.97x (0.95-1.00) against the profile of
    2026-...; 9.8 s``."""
    figures = ", ".join(
        f"{name} {d.factor:.2f}x ({d.low:.2f}-{d.high:.2f})" for name, d in _phases(drift)
    )
    when = drift.profile_created_at
    return f"{iid}: {figures} against the profile of {when}; {drift.seconds:.1f} s"


def drifted_line(iid: str, drift: EngineDrift, threshold: float) -> str | None:
    """``engine sim-0: decode 1.21x the profile (5-95 % 1.18-1.24), past the 10 % threshold``,
    naming every phase past the threshold; None when none is."""
    past = [
        f"{name} {d.factor:.2f}x the profile (5-95 % {d.low:.2f}-{d.high:.2f})"
        for name, d in _phases(drift)
        if d.drifted
    ]
    if not past:
        return None
    return f"engine {iid}: {', '.join(past)}, past the {_percent(threshold)} threshold"


def probe_lines(doc: ProbeDocument) -> list[str]:
    """Text mode's stdout: one line per engine, then where the document went is the caller's."""
    return [engine_line(iid, drift) for iid, drift in doc.engines.items()]


def drift_warnings(doc: ProbeDocument) -> list[str]:
    """One line per engine past the threshold (stderr, every format)."""
    lines = (drifted_line(iid, drift, doc.threshold) for iid, drift in doc.engines.items())
    return [line for line in lines if line is not None]


def probe_summary(doc: ProbeDocument) -> dict[str, Any]:
    """The JSON result's ``probe``: the store compared against, the threshold, the engines that
    drifted and each engine's phases (factor, interval, repeats, drifted) and time."""
    return {
        "profiles": doc.profiles,
        "profiles_sha256": doc.profiles_sha256,
        "threshold": doc.threshold,
        "drifted": doc.drifted(),
        "engines": {
            iid: {
                "profile_created_at": drift.profile_created_at,
                "seconds": drift.seconds,
                "prefill": None if drift.prefill is None else drift.prefill.model_dump(),
                "decode": None if drift.decode is None else drift.decode.model_dump(),
            }
            for iid, drift in doc.engines.items()
        },
    }
