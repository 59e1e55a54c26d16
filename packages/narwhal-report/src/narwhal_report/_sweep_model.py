"""The fleet model ``load_trial.py predict`` builds from one profile store for one workload's runs
(their shape and SLO), shared by the sweep's curve and its Monte Carlo at the measured rates."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

from narwhal_trial import (
    FleetModel,
    PredictRequest,
    TrialError,
    TrialRun,
    TrialShape,
    TrialTarget,
    load_model,
)


@dataclass(frozen=True, slots=True)
class StoreModel:
    """One store's fleet model for one workload's runs, and the shape and target they ran."""

    store: Path
    model: FleetModel
    shape: TrialShape
    target: TrialTarget


def sweep_model(
    runs: list[TrialRun], store: Path, fleet: Path, kv_transfer_s_per_token: float
) -> StoreModel | str:
    """The model ``load_trial.py predict`` builds for the runs' workload from ``store``, or why
    there is none."""
    m = runs[0].manifest
    shape = TrialShape(
        m.input_tokens,
        m.output_tokens,
        m.requests,
        kv_transfer_s_per_token,
        max_in_flight=m.limits.max_in_flight,
    )
    target = TrialTarget(Decimal(m.ttft_s), Decimal(m.tpot_s), Decimal(m.attainment))
    request = PredictRequest(fleet, store, None, shape, target, None, False)
    try:
        model, _ = load_model(request)
    except TrialError as exc:
        return f"no prediction from {store.name}: {exc}"
    return StoreModel(store, model, shape, target)
