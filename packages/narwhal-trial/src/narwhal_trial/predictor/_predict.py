"""``predict``: a trial's attainment and verdict from the fleet file, the profiles and the limits.

Nothing is contacted (the settings a ``--frontend`` publishes, and a ``--workload`` file, are read
by the command layer and handed in) and nothing of the simulator is used: the fleet runs in virtual
time (``_vtime``) on the profiles' fits (``_model``), once or replicated with the profiles' own
spread (``_rates``). No engine's decode batch may grow beyond the profiled decode concurrency.

A scheduled workload (``shape.scheduled``: its own due times and lengths) is predicted at
``speedup`` (default 1, its own pace) instead of a rate, and ``find_max_rate`` searches the
highest speedup predicted to pass (``_workload``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from narwhal_store import StoreError, load_fleet, load_limits, read_store
from narwhal_trial._errors import TrialUsageError
from narwhal_trial._provenance import dist_version
from narwhal_trial.documents._frontend import FrontendScheduler, profile_differences
from narwhal_trial.documents._prediction import Prediction
from narwhal_trial.documents._prediction_inputs import CalibrationDoc, Inputs
from narwhal_trial.predictor._calibrate import calibrate
from narwhal_trial.predictor._capacity import throughput_bound
from narwhal_trial.predictor._model import FleetModel, OutsideDomainError, TrialTarget, fleet_model
from narwhal_trial.predictor._probe_speed import (
    ProbeTrust,
    is_probe,
    probe_model,
    probe_use,
    read_probe,
)
from narwhal_trial.predictor._profile_domain import accepted_profile
from narwhal_trial.predictor._rates import find_max_rate, predict_rate
from narwhal_trial.predictor._sustainable import sustainable_rate
from narwhal_trial.predictor._vtime import TrialShape
from narwhal_trial.predictor._workload import (
    WorkloadFacts,
    check_schedule_domain,
    spread_shape,
    workload_doc,
)
from narwhal_trial.workload._schedule import check_speedup, speedup_refusal

#: ``--replications`` when not given: the pass probability to 1 %.
DEFAULT_REPLICATIONS = 100
#: The most replications ``predict`` runs per rate.
MAX_REPLICATIONS = 10_000


@dataclass(frozen=True, slots=True)
class PredictRequest:
    """What ``predict`` was asked."""

    fleet: Path
    profiles: Path
    limits: Path | None
    shape: TrialShape
    target: TrialTarget
    rate: float | None
    find_max_rate: bool
    replications: int = 1
    seed: int = 0
    calibrate: Path | None = None
    apply_calibration: bool = False
    frontend: str | None = None
    published: Mapping[str, FrontendScheduler] = field(default_factory=dict)
    """per engine iid, the settings ``frontend`` published (read by the command layer:
    ``server._frontend.read_published``), ranked between --limits and the profiles"""
    workload: WorkloadFacts | None = None
    """``--workload``: the file ``shape`` came from (read by the command layer:
    ``_predict_workload.workload_shape``)"""
    speedup: float | None = None
    """a scheduled shape's time axis divided by it (None: 1, its own pace); refused otherwise"""
    probe_weight: float | None = None
    """``--calibrate PROBE`` only: the power its factors are raised to (None: ``ProbeTrust``'s)"""

    @property
    def pace(self) -> float | None:
        """What the prediction runs at: ``rate``, or a scheduled shape's speedup (None with
        ``find_max_rate`` alone)."""
        if not self.shape.scheduled:
            return self.rate
        if self.speedup is None and self.find_max_rate:
            return None
        return 1.0 if self.speedup is None else self.speedup


def load_model(req: PredictRequest) -> tuple[FleetModel, Inputs]:
    """Read the three files and build the fleet model; ``TrialUsageError`` for unusable files."""
    try:
        fleet = load_fleet(req.fleet)
        store = read_store(req.profiles)
        limits = None if req.limits is None else load_limits(req.limits, fleet)
    except StoreError as exc:
        raise TrialUsageError(str(exc)) from exc
    published = req.published
    check_schedule_domain(fleet, store, req.shape)
    model = fleet_model(fleet, store, limits, spread_shape(req.shape), published)
    differences = []
    for iid, settings in published.items():
        found = accepted_profile(store, fleet, iid)
        profile = None if isinstance(found, str) else found
        differences += [f"{iid}: {d}" for d in profile_differences(settings, profile)]
    inputs = Inputs(
        fleet=str(req.fleet),
        fleet_sha256=fleet.sha256,
        profiles=str(req.profiles),
        profiles_sha256=store.sha256,
        limits=None if req.limits is None else str(req.limits),
        input_tokens=req.shape.input_tokens,
        output_tokens=req.shape.output_tokens,
        requests=req.shape.requests,
        max_in_flight=req.shape.max_in_flight or 0,
        ttft_s=str(req.target.ttft_s),
        tpot_s=str(req.target.tpot_s),
        attainment=str(req.target.attainment),
        kv_transfer_s_per_token=req.shape.kv_transfer_s_per_token,
        max_num_batched_tokens=req.shape.max_num_batched_tokens,
        replications=req.replications,
        seed=req.seed,
        spread={iid: s.source for iid, s in model.spread.engines.items()},
        engines=model.scheduling,
        frontend=req.frontend,
        frontend_differences=differences,
        workload=None
        if req.workload is None
        else workload_doc(req.workload, req.shape, req.speedup or 1.0),
    )
    return model, inputs


def _check_pace(req: PredictRequest) -> None:
    """TrialUsageError unless the request's rate or speedup fits its shape."""
    facts = req.workload
    if facts is not None and (facts.source != "runbook") != req.shape.scheduled:
        raise TrialUsageError(
            f"workload {facts.path} is {facts.source}, but the shape is "
            f"{'scheduled' if req.shape.scheduled else 'constant'}"
        )
    label = "the workload" if facts is None else f"workload {facts.path}"
    if req.shape.scheduled:
        if req.rate is not None:
            raise TrialUsageError(
                f"--rate cannot be used with {label}: its {req.shape.requests} requests keep "
                "their own due times; use --speedup X to scale its time axis"
            )
        if req.speedup is not None:
            check_speedup(req.speedup)
        return
    if req.speedup is not None:
        raise speedup_refusal("--speedup", label, "predicted at --rate")
    if req.rate is None and not req.find_max_rate:
        raise TrialUsageError("give --rate, --find-max-rate, or both")


def predict(req: PredictRequest) -> Prediction:
    """The whole ``predict`` document."""
    _check_pace(req)
    if not 1 <= req.replications <= MAX_REPLICATIONS:
        raise TrialUsageError(
            f"--replications must be 1 to {MAX_REPLICATIONS}, got {req.replications}"
        )
    if req.apply_calibration and req.calibrate is None:
        raise TrialUsageError("--apply-calibration needs --calibrate RUN (the run it corrects by)")
    probed = req.calibrate is not None and is_probe(req.calibrate)
    if req.probe_weight is not None and not probed:
        raise TrialUsageError(
            f"--probe-weight {req.probe_weight:g} is for --calibrate PROBE (a probe file), "
            f"got {'no --calibrate' if req.calibrate is None else f'run {req.calibrate}'}"
        )
    if req.probe_weight is not None and not 0.0 <= req.probe_weight <= 1.0:
        raise TrialUsageError(f"--probe-weight must be 0 to 1, got {req.probe_weight:g}")
    model, inputs = load_model(req)
    calibration = probe = None
    if req.calibrate is not None and probed:
        if req.apply_calibration:
            raise TrialUsageError(
                f"--apply-calibration is for --calibrate RUN; {req.calibrate} is a file (a "
                "probe), which is always applied"
            )
        iids = [m.iid for m in model.engines]
        found_probe = read_probe(req.calibrate, inputs.profiles_sha256, iids)
        trust = ProbeTrust() if req.probe_weight is None else ProbeTrust(weight=req.probe_weight)
        model = probe_model(model, found_probe, monte_carlo=req.replications > 1, trust=trust)
        probe = probe_use(req.calibrate, found_probe, iids, trust)
    elif req.calibrate is not None:
        model, found = calibrate(
            model,
            str(req.calibrate),
            req.shape.without_schedule(),
            apply=req.apply_calibration,
            replications=req.replications,
            seed=req.seed,
        )
        calibration = CalibrationDoc(
            run=found.run,
            rate=found.rate,
            requests=found.requests,
            input_tokens=found.input_tokens,
            output_tokens=found.output_tokens,
            measured_ttft_p50_s=found.measured_ttft_p50,
            measured_tpot_p50_s=found.measured_tpot_p50,
            predicted_ttft_p50_s=found.predicted_ttft_p50,
            predicted_tpot_p50_s=found.predicted_tpot_p50,
            prefill_factor=found.prefill_factor,
            decode_factor=found.decode_factor,
            applied=found.applied,
        )
    reps, seed, pace, shape = req.replications, req.seed, req.pace, req.shape
    bound = throughput_bound(model, shape) if req.find_max_rate else None
    at_rate = (
        None if pace is None else predict_rate(model, shape, req.target, pace, reps, seed, bound)
    )
    search = None
    if req.find_max_rate:
        assert bound is not None
        start = (req.speedup if shape.scheduled else req.rate) or 1.0
        search = find_max_rate(model, shape, req.target, start, reps, seed, bound)
        if search.max_rate is not None:
            edge = search.max_rate if search.max_speedup is None else search.max_speedup
            capacity = sustainable_rate(model, shape, req.target, bound, edge)
            search = search.model_copy(update={"sustainable": capacity})
        if at_rate is None and search.max_rate is None and search.limited_by == "profile domain":
            what = "speedup" if req.shape.scheduled else "rate"
            raise OutsideDomainError(
                f"no {what} predicted within the profiled domain: {search.detail}"
            )
    return Prediction(
        generator=f"narwhal-trial {dist_version('narwhal-trial')}",
        inputs=inputs,
        calibration=calibration,
        probe=probe,
        prediction=at_rate,
        search=search,
    )
