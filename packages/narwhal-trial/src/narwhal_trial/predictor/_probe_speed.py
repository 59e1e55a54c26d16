"""``predict --calibrate PROBE``: each engine's speed today, from a freshness probe.

A probe (``narwhal.probe``, written by ``narwhal-profile --verify``) re-measured a few of the
profile's own points minutes ago; each repeat is a factor, the probe's timing over the profile's
at the same point. With the Monte Carlo, every replication draws each engine's prefill speed
and decode speed as the median of a bootstrap resample of the probe's factors of that phase
(``_spread``: the probe's interval, not the profile sweep's whole history); a phase the probe
did not measure keeps the sweep's own speed. With one replication (the fits alone) the fits are
scaled by the probe's median factors instead.

The probe must be of the same store (its ``profiles_sha256``) and hold every engine of the fleet.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from narwhal_store import DriftFactor, ProbeDocument, StoreError, load_probe
from narwhal_trial._errors import TrialUsageError
from narwhal_trial.documents._prediction_inputs import ProbeFactor, ProbeUse
from narwhal_trial.predictor._model import FleetModel, scale_fits
from narwhal_trial.predictor._spread import FleetSpread


def is_probe(path: Path) -> bool:
    """A probe is a file; a run is a folder."""
    return path.is_file()


def read_probe(path: Path, store_sha256: str, iids: list[str]) -> ProbeDocument:
    """The probe at ``path``; TrialUsageError unless it is readable, of this store and of every
    engine in ``iids``."""
    try:
        probe = load_probe(path)
    except StoreError as exc:
        raise TrialUsageError(f"--calibrate {path}: {exc}") from exc
    if probe.profiles_sha256 != store_sha256:
        raise TrialUsageError(
            f"--calibrate {path}: the probe compared the engines with store {probe.profiles} "
            f"(sha256 {probe.profiles_sha256[:12]}), not with --profiles (sha256 "
            f"{store_sha256[:12]}): probe again against this store"
        )
    missing = [iid for iid in iids if iid not in probe.engines]
    if missing:
        raise TrialUsageError(
            f"--calibrate {path}: the probe has no engine {', '.join(missing)} "
            f"(it probed {', '.join(probe.engines)})"
        )
    return probe


def _factors(probe: ProbeDocument, iid: str, phase: str) -> tuple[float, ...]:
    return tuple(f for p in probe.engines[iid].points if p.phase == phase for f in p.factors)


def _median(drift: DriftFactor | None) -> float:
    return 1.0 if drift is None else drift.factor


def probe_model(model: FleetModel, probe: ProbeDocument, *, monte_carlo: bool) -> FleetModel:
    """``model`` with each engine's speed from ``probe``: in the spread (``monte_carlo``), else
    on the fits."""
    if not monte_carlo:
        engines = [
            scale_fits(
                m,
                _median(probe.engines[m.iid].prefill),
                _median(probe.engines[m.iid].decode),
            )
            for m in model.engines
        ]
        return dataclasses.replace(model, engines=engines, _replicas={})
    spreads = {
        iid: dataclasses.replace(
            spread,
            probe_prefill=_factors(probe, iid, "prefill"),
            probe_decode=_factors(probe, iid, "decode"),
        )
        for iid, spread in model.spread.engines.items()
    }
    return dataclasses.replace(model, spread=FleetSpread(spreads), _replicas={})


def _factor(drift: DriftFactor | None) -> ProbeFactor | None:
    if drift is None:
        return None
    return ProbeFactor(factor=drift.factor, low=drift.low, high=drift.high, repeats=drift.repeats)


def probe_use(path: Path, probe: ProbeDocument, iids: list[str]) -> ProbeUse:
    """What the prediction document says of the probe it used."""
    return ProbeUse(
        probe=str(path),
        created_at=probe.created_at,
        threshold=probe.threshold,
        prefill={iid: _factor(probe.engines[iid].prefill) for iid in iids},
        decode={iid: _factor(probe.engines[iid].decode) for iid in iids},
        drifted=[iid for iid in iids if probe.engines[iid].drifted],
    )
