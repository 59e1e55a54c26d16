"""The fleet as ``predict`` sees it: every engine's fits, their residuals, decode domain and
spread, from the fleet file, the profile store (with its sidecar) and the limits file.

The prediction refuses to extrapolate: every engine needs an accepted profile for its current key
with the shape inside its domain (the checks ``check`` makes).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal

from narwhal_store import (
    DECODE_FORM,
    PREFILL_FORM,
    FitDoc,
    FitQuality,
    LimitsFile,
    LoadedFleet,
    LoadedStore,
    Profile,
)
from narwhal_trial._errors import TrialUsageError
from narwhal_trial.documents._frontend import FrontendScheduler
from narwhal_trial.documents._prediction import EngineSettings
from narwhal_trial.predictor._engine_settings import scheduling
from narwhal_trial.predictor._profile_domain import accepted_profile, domain_items, lengths_hint
from narwhal_trial.predictor._spread import (
    EVERY,
    EngineSpread,
    FleetSpread,
    Replica,
    Source,
    engine_spread,
)
from narwhal_trial.predictor._vtime import EngineModel, TrialShape


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
    """Every engine's model, its fits' worst residuals, its decode domain and its spread."""

    engines: list[EngineModel]
    prefill_error: dict[str, float]
    decode_error: dict[str, float]
    decode_max: dict[str, int | None]
    spread: FleetSpread = field(default_factory=lambda: FleetSpread({}))
    scheduling: dict[str, EngineSettings] = field(default_factory=dict)
    _replicas: dict[int, list[Replica]] = field(default_factory=dict, compare=False, repr=False)

    def replicas(self, seed: int, count: int, vary: frozenset[Source] = EVERY) -> list[Replica]:
        """Replications ``0 .. count-1`` of ``seed`` (kept: every rate uses the same ones);
        ``vary``: the sources drawn (fewer than every one: drawn afresh, not kept)."""
        if vary != EVERY:
            return [self.spread.replica(seed, r, vary) for r in range(count)]
        if seed not in self._replicas or len(self._replicas[seed]) != count:
            self._replicas[seed] = [self.spread.replica(seed, r) for r in range(count)]
        return self._replicas[seed]

    def scaled(self, sign: int) -> list[EngineModel]:
        """Every fit off by its worst relative residual (``sign`` +1: slower, -1: faster)."""
        return [
            scale_fits(m, 1 + sign * self.prefill_error[m.iid], 1 + sign * self.decode_error[m.iid])
            for m in self.engines
        ]


def scale_fits(m: EngineModel, prefill: float, decode: float) -> EngineModel:
    """``m`` with its prefill fit times ``prefill`` and its decode fit (and mixing step) times
    ``decode``."""
    return dataclasses.replace(
        m,
        a=m.a * prefill,
        b=m.b * prefill,
        c=m.c * prefill,
        d0=m.d0 * decode,
        d1=m.d1 * decode,
        d2=m.d2 * decode,
        step_s=m.step_s * decode,
    )


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
    fleet: LoadedFleet,
    store: LoadedStore,
    limits: LimitsFile | None,
    shape: TrialShape,
    published: Mapping[str, FrontendScheduler] | None = None,
) -> FleetModel:
    """The engines' models; ``OutsideDomainError`` lists every engine outside its domain.
    ``published``: per engine, the settings a frontend publishes of it (``--frontend``)."""
    entries = fleet.config.engines
    has_prefill = any(e.role == "prefill" for e in entries)
    problems: list[str] = []
    failed: set[str] = set()
    engines: list[EngineModel] = []
    prefill_error: dict[str, float] = {}
    decode_error: dict[str, float] = {}
    decode_max: dict[str, int | None] = {}
    spreads: dict[str, EngineSpread] = {}
    schedules: dict[str, EngineSettings] = {}
    for entry in entries:
        found = accepted_profile(store, fleet, entry.iid)
        if isinstance(found, str):
            problems.append(f"{entry.iid}: accepted profile: {found}")
            continue
        # a decode engine without prefill engines in the fleet serves whole requests
        role = "mixed" if entry.role == "decode" and not has_prefill else entry.role
        items = domain_items(entry.iid, role, found, shape.input_tokens, shape.output_tokens)
        problems += [f"{i.subject}: {i.what}: {i.detail}" for i in items if not i.ok]
        failed |= {i.what for i in items if not i.ok}
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
        sched = scheduling(
            entry.iid,
            found,
            limits,
            shape.max_num_batched_tokens,
            None if published is None else published.get(entry.iid),
        )
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
                max_num_seqs=sched.max_num_seqs,
                budget=sched.max_num_batched_tokens,
                chunked=sched.chunked_prefill,
                share=sched.mixing_share,
                step_s=sched.mixing_step_s,
            )
        )
        schedules[entry.iid] = sched
        prefill_error[entry.iid] = _worst(pf)
        decode_error[entry.iid] = _worst(df)
        decode_max[entry.iid] = _concurrency_max(found)
        try:
            samples = store.samples(found.key)
        except KeyError:
            spreads[entry.iid] = EngineSpread((), (), (), (), "no sidecar entry: the fits alone")
        else:
            spreads[entry.iid] = engine_spread(found, samples, shape.output_tokens)
    if problems:
        raise OutsideDomainError(
            "the trial lies outside the accepted profile domain: "
            + "; ".join(problems)
            + lengths_hint(failed)
        )
    return FleetModel(
        engines, prefill_error, decode_error, decode_max, FleetSpread(spreads), schedules
    )
