"""``predict``: a trial's attainment and verdict from the fleet file, the profiles and the limits.

Nothing is contacted and nothing of the simulator is used: the fleet runs in virtual time
(``_vtime``) on the profiles' fits. The prediction refuses to extrapolate: every engine needs an
accepted profile for its current key with the shape inside its domain (the checks ``check`` makes),
and no engine's decode batch may grow beyond the profiled decode concurrency.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Literal

from narwhal_store import (
    DECODE_FORM,
    PREFILL_FORM,
    FitDoc,
    FitQuality,
    LimitsFile,
    LoadedFleet,
    LoadedStore,
    Profile,
    StoreError,
    load_fleet,
    load_limits,
    read_store,
)
from narwhal_trial._errors import TrialUsageError
from narwhal_trial._prediction import (
    EdgeBand,
    EngineUse,
    FitInterval,
    Inputs,
    Prediction,
    RatePrediction,
    RateSearch,
)
from narwhal_trial._profile_domain import accepted_profile, domain_items
from narwhal_trial._provenance import dist_version
from narwhal_trial._records import Distribution
from narwhal_trial._stats import distribution, required_good
from narwhal_trial._vtime import EngineModel, SimulatedOutcome, TrialShape, simulate

_SEARCH_PRECISION = 0.01  # stop bisecting when the bracket is within 1 %
_SEARCH_STEPS = 40


class OutsideDomainError(TrialUsageError):
    """The shape or the predicted load lies outside the profiled domain: predict refuses to
    extrapolate (exit 1, a blocking error; 2 is a prediction that misses the target)."""


@dataclass(frozen=True, slots=True)
class TrialTarget:
    """The trial's pass rule: TTFT and TPOT bounds, the attainment, the request count."""

    ttft_s: Decimal
    tpot_s: Decimal
    attainment: Decimal


@dataclass(frozen=True, slots=True)
class FleetModel:
    """Every engine's model, its fits' worst residuals and its decode domain."""

    engines: list[EngineModel]
    prefill_error: dict[str, float]
    decode_error: dict[str, float]
    decode_max: dict[str, int | None]

    def scaled(self, sign: int) -> list[EngineModel]:
        """Every fit off by its worst relative residual (``sign`` +1: slower, -1: faster)."""
        out = []
        for m in self.engines:
            fp = 1 + sign * self.prefill_error[m.iid]
            fd = 1 + sign * self.decode_error[m.iid]
            out.append(
                EngineModel(
                    m.iid,
                    m.role,
                    m.device,
                    m.a * fp,
                    m.b * fp,
                    m.c * fp,
                    m.d0 * fd,
                    m.d1 * fd,
                    m.d2 * fd,
                    m.max_num_seqs,
                )
            )
        return out


def _worst(fit: FitDoc | None) -> float:
    quality = None if fit is None else FitQuality.of(fit)
    return 0.0 if quality is None else min(quality.worst_rel_error, 0.99)


def _concurrency_max(profile: Profile) -> int | None:
    fit = profile.decode_fit
    levels = None if fit is None else fit.domain.get("concurrency")
    if not isinstance(levels, list) or not levels:
        return None
    return max(int(v) for v in levels)


def fleet_model(
    fleet: LoadedFleet, store: LoadedStore, limits: LimitsFile | None, shape: TrialShape
) -> FleetModel:
    """The engines' models; ``OutsideDomainError`` lists every engine outside its domain."""
    entries = fleet.config.engines
    has_prefill = any(e.role == "prefill" for e in entries)
    problems: list[str] = []
    engines: list[EngineModel] = []
    prefill_error: dict[str, float] = {}
    decode_error: dict[str, float] = {}
    decode_max: dict[str, int | None] = {}
    for entry in entries:
        found = accepted_profile(store, fleet, entry.iid)
        if isinstance(found, str):
            problems.append(f"{entry.iid}: accepted profile: {found}")
            continue
        # a decode engine without prefill engines in the fleet serves whole requests
        role = "mixed" if entry.role == "decode" and not has_prefill else entry.role
        items = domain_items(entry.iid, role, found, shape.input_tokens, shape.output_tokens)
        problems += [f"{i.subject}: {i.what}: {i.detail}" for i in items if not i.ok]
        pf, df = found.prefill_fit, found.decode_fit
        if pf.form != PREFILL_FORM or (df is not None and df.form != DECODE_FORM):
            problems.append(
                f"{entry.iid}: fit forms {pf.form}/{df.form if df else None}: predict knows "
                f"{PREFILL_FORM} and {DECODE_FORM}"
            )
            continue
        d = df.coefficients if df is not None else {"d0": 0.0, "d1": 0.0, "d2": 0.0}
        c = pf.coefficients
        group = entry.gpu_group
        device = group if group is not None and found.colocation is None else entry.iid
        engines.append(
            EngineModel(
                entry.iid,
                entry.role,
                device,
                c["a"],
                c["b"],
                c["c"],
                d["d0"],
                d["d1"],
                d["d2"],
                limits.engines[entry.iid].max_num_seqs
                if limits is not None and entry.iid in limits.engines
                else None,
            )
        )
        prefill_error[entry.iid] = _worst(pf)
        decode_error[entry.iid] = _worst(df)
        decode_max[entry.iid] = _concurrency_max(found)
    if problems:
        raise OutsideDomainError(
            "the trial lies outside the accepted profile domain: " + "; ".join(problems)
        )
    return FleetModel(engines, prefill_error, decode_error, decode_max)


def _good(outcome: SimulatedOutcome, target: TrialTarget) -> int:
    ttft, tpot = float(target.ttft_s), float(target.tpot_s)
    return sum(
        1 for a, b in zip(outcome.ttft, outcome.tpot, strict=True) if a <= ttft and b <= tpot
    )


def _check_batch(model: FleetModel, outcome: SimulatedOutcome, rate: float) -> None:
    beyond = [
        f"{iid} reaches {n} decoding sequences, beyond the profiled decode domain "
        f"(concurrency up to {model.decode_max[iid]})"
        for iid, n in outcome.max_decoding.items()
        if (top := model.decode_max.get(iid)) is not None and n > top
    ]
    if beyond:
        raise OutsideDomainError(
            f"at {rate:g} request/s " + "; ".join(beyond) + ": profile with a larger "
            "--decode-concurrency (or give --limits) before predicting this rate"
        )


def predict_rate(
    model: FleetModel, shape: TrialShape, target: TrialTarget, rate: float
) -> RatePrediction:
    """The predicted trial at ``rate``; ``OutsideDomainError`` when the load leaves the domain."""
    outcome = simulate(model.engines, shape, rate)
    _check_batch(model, outcome, rate)
    need = required_good(target.attainment, shape.requests)
    good = _good(outcome, target)
    slow = _good(simulate(model.scaled(+1), shape, rate), target)
    fast = _good(simulate(model.scaled(-1), shape, rate), target)
    roles = {m.iid: m for m in model.engines}
    verdict: dict[str, bool] = {"pass": good >= need}
    return RatePrediction(
        **verdict,
        rate=rate,
        good=good,
        required_good=need,
        attainment=good / shape.requests,
        attainment_interval=FitInterval(
            low=min(slow, good) / shape.requests, high=max(fast, good) / shape.requests
        ),
        pass_interval=(min(slow, good) >= need, max(fast, good) >= need),
        schedule_misses=outcome.schedule_misses,
        ttft_s=Distribution.model_validate(distribution(outcome.ttft)),
        tpot_s=Distribution.model_validate(distribution(outcome.tpot)),
        engines=[
            EngineUse(
                iid=iid,
                role=roles[iid].role,
                device=roles[iid].device,
                served=outcome.served_by[iid],
                prefilled=outcome.prefilled_by[iid],
                max_decoding=outcome.max_decoding[iid],
                decode_domain_max=model.decode_max[iid],
            )
            for iid in outcome.served_by
        ],
    )


def find_max_rate(
    model: FleetModel, shape: TrialShape, target: TrialTarget, start: float = 1.0
) -> RateSearch:
    """The highest rate predicted to pass: double (or halve) from ``start`` to bracket the edge,
    then bisect to within 1 %. Assumes a passing rate's lower rates pass too."""
    tried: list[tuple[float, str]] = []

    def judge(rate: float) -> str:
        outcome = simulate(model.engines, shape, rate)
        try:
            _check_batch(model, outcome, rate)
        except OutsideDomainError:
            tried.append((rate, "outside domain"))
            return "outside domain"
        verdict = (
            "pass"
            if _good(outcome, target) >= required_good(target.attainment, shape.requests)
            else "miss"
        )
        tried.append((rate, verdict))
        return verdict

    lo: float | None = None
    hi, hi_state = start, judge(start)
    if hi_state == "pass":
        lo = hi
        for _ in range(_SEARCH_STEPS):
            hi, hi_state = hi * 2, judge(hi * 2)
            if hi_state != "pass":
                break
            lo = hi
    else:
        for _ in range(_SEARCH_STEPS):
            rate = hi / 2
            state = judge(rate)
            if state == "pass":
                lo = rate
                break
            hi, hi_state = rate, state
    if lo is None:
        return RateSearch(
            max_rate=None,
            at_max=None,
            limited_by="target" if hi_state == "miss" else "profile domain",
            detail=f"{hi:g} request/s is already {hi_state}",
            tried=tried,
            band=EdgeBand(pass_90=None, pass_50=None, pass_10=None, replications=1),
        )
    while hi / lo - 1 > _SEARCH_PRECISION:
        mid = (lo * hi) ** 0.5
        state = judge(mid)
        if state == "pass":
            lo = mid
        else:
            hi, hi_state = mid, state
    limited: Literal["target", "profile domain"] = (
        "target" if hi_state == "miss" else "profile domain"
    )
    detail = f"{hi:.4g} request/s is predicted to " + (
        "miss" if hi_state == "miss" else "need a decode batch beyond the profiled concurrency"
    )
    return RateSearch(
        max_rate=lo,
        at_max=predict_rate(model, shape, target, lo),
        limited_by=limited,
        detail=detail,
        tried=tried,
        band=EdgeBand(pass_90=lo, pass_50=lo, pass_10=lo, replications=1),
    )


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


def load_model(req: PredictRequest) -> tuple[FleetModel, Inputs]:
    """Read the three files and build the fleet model; ``TrialUsageError`` for unusable files."""
    try:
        fleet = load_fleet(req.fleet)
        store = read_store(req.profiles)
        limits = None if req.limits is None else load_limits(req.limits, fleet)
    except StoreError as exc:
        raise TrialUsageError(str(exc)) from exc
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
    )
    return fleet_model(fleet, store, limits, req.shape), inputs


def predict(req: PredictRequest) -> Prediction:
    """The whole ``predict`` document."""
    if req.rate is None and not req.find_max_rate:
        raise TrialUsageError("give --rate, --find-max-rate, or both")
    model, inputs = load_model(req)
    at_rate = None if req.rate is None else predict_rate(model, req.shape, req.target, req.rate)
    search = None
    if req.find_max_rate:
        search = find_max_rate(model, req.shape, req.target, req.rate or 1.0)
        if at_rate is None and search.max_rate is None and search.limited_by == "profile domain":
            raise OutsideDomainError(
                f"no rate predicted within the profiled domain: {search.detail}"
            )
    return Prediction(
        generator=f"narwhal-trial {dist_version('narwhal-trial')}",
        inputs=inputs,
        prediction=at_rate,
        search=search,
    )
