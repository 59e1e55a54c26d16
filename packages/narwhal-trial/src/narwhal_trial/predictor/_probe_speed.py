"""``predict --calibrate PROBE``: each engine's speed today, from a freshness probe.

A probe (``narwhal.probe``, written by ``narwhal-profile --verify``) re-measured a few of the
profile's own points minutes ago; each repeat is a factor, the probe's timing over the profile's
at the same point. With the Monte Carlo, every replication draws each engine's prefill speed
and decode speed as the median of a bootstrap resample of the probe's factors of that phase
(``_spread``: the probe's interval, not the profile sweep's whole history), raised to the
probe's weight and times an unseen drift; a phase the probe did not measure keeps the sweep's own
speed. With one replication (the fits alone) the fits are scaled by the probe's median factors,
raised to the weight, instead.

The weight and the unseen drift (``ProbeTrust``) are what a backtest against vLLM's CPU server
found (docs/design.md, "How much of a probe to believe"): a probe's minute sees a moment of the
engine, and the trials after it ran nearer the profile than the probe said. Its factor taken whole
(weight 1) was further from the trials than no factor at all; a quarter of its log was the least
wrong. What the probe does not see, the engine's moves after it, is a log-normal factor per
replication: ``UNSEEN_PREFILL_SD`` and ``UNSEEN_DECODE_SD``, the spread of that backtest's errors
left with the weighted factor.

The probe must be of the same store (its ``profiles_sha256``) and hold every engine of the fleet.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from narwhal_store import DriftFactor, ProbeDocument, StoreError, load_probe
from narwhal_trial._errors import TrialUsageError
from narwhal_trial.documents._prediction_inputs import ProbeFactor, ProbeUse
from narwhal_trial.predictor._model import FleetModel, scale_fits
from narwhal_trial.predictor._spread import FleetSpread

#: The probe's factor is raised to this power (``predict --probe-weight``): 1 takes it whole.
DEFAULT_PROBE_WEIGHT = 0.25
#: The relative standard deviation of the engine's prefill speed the probe did not see.
UNSEEN_PREFILL_SD = 0.025
#: The relative standard deviation of the engine's decode speed the probe did not see.
UNSEEN_DECODE_SD = 0.06


@dataclass(frozen=True, slots=True)
class ProbeTrust:
    """How much of a probe a prediction believes: its factors raised to ``weight``, each
    replication's speed times a log-normal drift of ``prefill_sd`` or ``decode_sd`` (relative)."""

    weight: float = DEFAULT_PROBE_WEIGHT
    prefill_sd: float = UNSEEN_PREFILL_SD
    decode_sd: float = UNSEEN_DECODE_SD


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


def _median(drift: DriftFactor | None, weight: float) -> float:
    return 1.0 if drift is None else float(drift.factor**weight)


def probe_model(
    model: FleetModel, probe: ProbeDocument, *, monte_carlo: bool, trust: ProbeTrust
) -> FleetModel:
    """``model`` with each engine's speed from ``probe`` as ``trust`` believes it: in the spread
    (``monte_carlo``), else on the fits."""
    if not monte_carlo:
        engines = [
            scale_fits(
                m,
                _median(probe.engines[m.iid].prefill, trust.weight),
                _median(probe.engines[m.iid].decode, trust.weight),
            )
            for m in model.engines
        ]
        return dataclasses.replace(model, engines=engines, _replicas={})
    spreads = {
        iid: dataclasses.replace(
            spread,
            probe_prefill=_factors(probe, iid, "prefill"),
            probe_decode=_factors(probe, iid, "decode"),
            probe_weight=trust.weight,
            unseen_sd=(trust.prefill_sd, trust.decode_sd),
        )
        for iid, spread in model.spread.engines.items()
    }
    return dataclasses.replace(model, spread=FleetSpread(spreads), _replicas={})


def _factor(drift: DriftFactor | None) -> ProbeFactor | None:
    if drift is None:
        return None
    return ProbeFactor(factor=drift.factor, low=drift.low, high=drift.high, repeats=drift.repeats)


def probe_use(path: Path, probe: ProbeDocument, iids: list[str], trust: ProbeTrust) -> ProbeUse:
    """What the prediction document says of the probe it used, and how much it believed it."""
    return ProbeUse(
        probe=str(path),
        created_at=probe.created_at,
        threshold=probe.threshold,
        weight=trust.weight,
        unseen_prefill_sd=trust.prefill_sd,
        unseen_decode_sd=trust.decode_sd,
        prefill={iid: _factor(probe.engines[iid].prefill) for iid in iids},
        decode={iid: _factor(probe.engines[iid].decode) for iid in iids},
        drifted=[iid for iid in iids if probe.engines[iid].drifted],
    )
