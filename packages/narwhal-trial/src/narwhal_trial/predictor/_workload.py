"""What ``predict`` does with a ``--workload``: the facts it records, the profiled domain over a
scheduled workload's lengths, and the shape the fleet model's spread is built for.

The command layer reads the file (``_predict_workload``: it needs the workload's own validation,
which imports the engine client) and hands in the facts and the shape; this module, like the rest
of the predictor, contacts nothing.

A scheduled workload's requests have their own lengths, so every one of them must lie inside each
engine's profiled domain (the items ``check`` checks for the runbook's one shape): the shortest
and longest prompt, and the smallest and largest mean decode context, are checked. The Monte
Carlo's TPOT noise is sized for one output length (``_spread``): the median request's.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

from narwhal_store import LoadedFleet, LoadedStore
from narwhal_trial.documents._prediction_schedule import PredictedWorkload
from narwhal_trial.predictor._model import OutsideDomainError
from narwhal_trial.predictor._profile_domain import accepted_profile, domain_items, lengths_hint
from narwhal_trial.predictor._vtime import TrialShape


@dataclass(frozen=True, slots=True)
class WorkloadFacts:
    """What ``predict`` records of a ``--workload`` file; the shape holds its lengths (and a
    scheduled one's due times)."""

    path: str
    sha256: str
    source: Literal["runbook", "trace", "synthetic"]
    """runbook: no schedule; trace or synthetic: its schedule's source"""


def _extremes(shape: TrialShape) -> list[int]:
    """The requests with the shortest and longest prompt and mean decode context."""
    ins, outs = shape.input_lengths(), shape.output_lengths()
    ctx = [i + o / 2 for i, o in zip(ins, outs, strict=True)]
    picks: list[int] = []
    for values in (ins, ctx):
        order = sorted(range(len(values)), key=values.__getitem__)
        picks += [k for k in (order[0], order[-1]) if k not in picks]
    return picks


def check_schedule_domain(fleet: LoadedFleet, store: LoadedStore, shape: TrialShape) -> None:
    """OutsideDomainError when a scheduled shape's request lies outside an engine's profiled
    domain (engines without an accepted profile are left to ``fleet_model``, which names them)."""
    if not shape.scheduled:
        return
    ins, outs = shape.input_lengths(), shape.output_lengths()
    entries = fleet.config.engines
    has_prefill = any(e.role == "prefill" for e in entries)
    problems: list[str] = []
    failed: set[str] = set()
    for entry in entries:
        found = accepted_profile(store, fleet, entry.iid)
        if isinstance(found, str):
            continue
        role = "mixed" if entry.role == "decode" and not has_prefill else entry.role
        seen: set[str] = set()
        for k in _extremes(shape):
            for item in domain_items(entry.iid, role, found, ins[k], outs[k]):
                if not item.ok and item.what not in seen:
                    seen.add(item.what)
                    failed.add(item.what)
                    problems.append(f"{item.subject}: {item.what}: request {k}: {item.detail}")
    if problems:
        raise OutsideDomainError(
            "the workload's requests lie outside the accepted profile domain: "
            + "; ".join(problems)
            + lengths_hint(failed)
        )


def spread_shape(shape: TrialShape) -> TrialShape:
    """The constant shape the fleet model is built for: a scheduled shape's median-output
    request's lengths (its TPOT noise windows); the runbook's shape itself."""
    if not shape.scheduled:
        return shape
    outs = shape.output_lengths()
    order = sorted(range(len(outs)), key=outs.__getitem__)
    k = order[(len(order) - 1) // 2]
    return dataclasses.replace(
        shape.without_schedule(),
        input_tokens=shape.input_lengths()[k],
        output_tokens=outs[k],
    )


def workload_doc(facts: WorkloadFacts, shape: TrialShape, speedup: float) -> PredictedWorkload:
    """``Inputs.workload``: the file, and a scheduled one's requests, span and mean rate at
    ``speedup``."""
    if not shape.scheduled or shape.offsets_s is None:
        return PredictedWorkload(
            path=facts.path,
            sha256=facts.sha256,
            source=facts.source,
            requests=None,
            span_s=None,
            speedup=None,
            mean_rate=None,
        )
    return PredictedWorkload(
        path=facts.path,
        sha256=facts.sha256,
        source=facts.source,
        requests=shape.requests,
        span_s=shape.offsets_s[-1],
        speedup=speedup,
        mean_rate=shape.mean_rate(speedup),
    )
