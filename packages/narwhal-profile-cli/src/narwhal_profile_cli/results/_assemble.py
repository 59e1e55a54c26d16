"""Turn one engine's measurements into its store profile and sidecar entry (docs/design.md §7)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from importlib import metadata
from typing import Any

from narwhal_engine_client import evidence_sha256
from narwhal_fit import DecodeFit, PrefillFit
from narwhal_profile_cli.results._result import DISTRIBUTION
from narwhal_profile_cli.sweeps._decode import Cohort
from narwhal_profile_cli.sweeps._evidence import generation
from narwhal_profile_cli.sweeps._mixing_plan import MixingResult
from narwhal_profile_cli.sweeps._neighbours import NeighbourSettings
from narwhal_profile_cli.sweeps._prefill import PrefillTimings
from narwhal_profile_cli.sweeps._preflight import EnginePlan
from narwhal_store import (
    PENDING_SHA256,
    AppliedLimits,
    Binding,
    Colocation,
    DecodeFitDoc,
    DecodeSample,
    EngineFacts,
    Evidence,
    Generator,
    LoadedFleet,
    MixingFitDoc,
    NeighbourRecord,
    PrefillFitDoc,
    PrefillSample,
    Profile,
    ProfileSamples,
    ProfileStore,
    SamplesSidecar,
    SweepSettings,
    new_documents,
    profile_key,
    sidecar_path,
)

GENERATOR_NAME = "narwhal-profile"


@dataclass(frozen=True, slots=True)
class Measured:
    """One finished engine: its profile and its sidecar entry."""

    profile: Profile
    samples: ProfileSamples


@dataclass(frozen=True, slots=True)
class EngineMeasurement:
    """Everything one engine's sweep produced, before it is shaped into documents."""

    plan: EnginePlan
    sweep_tokens: int
    prefill_repeats: int
    decode_repeats: int
    prompt_seed: int
    before: dict[str, Any]
    after: dict[str, Any]
    prefill: list[PrefillTimings]
    prefill_fit: PrefillFit
    cohorts: list[Cohort]
    decode_fit: DecodeFit
    colocation: NeighbourSettings | None
    neighbours: Sequence[NeighbourRecord]
    mixing: MixingResult | None = None
    """The mixing points and their fit (``--mixing``; None without it)."""


def generator() -> Generator:
    """This program and its installed version."""
    try:
        version = metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a source tree
        version = "unknown"
    return Generator(name=GENERATOR_NAME, version=version)


def _decode_sample(cohort: Cohort) -> DecodeSample:
    point = cohort.point
    return DecodeSample(
        input_len=cohort.input_len,
        concurrency=cohort.concurrency,
        repeat=cohort.repeat,
        valid=point is not None,
        reason=cohort.reason,
        streams=[s.record() for s in cohort.streams],
        tpot_s=None if point is None else point.tpot_s,
        ctx=None if point is None else point.ctx,
        burst_share=cohort.burst_share,
        remeasured=cohort.remeasured,
    )


def assemble(
    fleet: LoadedFleet,
    m: EngineMeasurement,
    *,
    parallel_groups: int = 1,
    shard: str | None = None,
) -> Measured:
    """The profile (binding, facts, fits, colocation) and its sidecar entry."""
    plan = m.plan
    key = profile_key(fleet, plan.entry.iid)
    decode_doc = DecodeFitDoc.model_validate(m.decode_fit.to_dict())
    points = plan.points
    samples = ProfileSamples(
        key=key,
        evidence=Evidence(before=m.before, after=m.after),
        settings=SweepSettings(
            prefill_lens=list(points.prefill_lens),
            decode_input_lens=list(points.decode_input_lens),
            decode_concurrency=list(points.decode_concurrency),
            decode_tokens=m.sweep_tokens,
            prefill_repeats=m.prefill_repeats,
            decode_repeats=m.decode_repeats,
            limits_applied=None
            if points.limit is None
            else AppliedLimits(max_num_seqs=points.limit),
            prompt_seed=m.prompt_seed,
            parallel_groups=parallel_groups,
            shard=shard,
        ),
        prefill_samples=[
            PrefillSample(
                length=t.length,
                ttft_s=list(t.ttft_s),
                request_ids=list(t.request_ids),
                resent_request_ids=list(t.resent),
                remeasured=list(t.remeasured),
            )
            for t in m.prefill
        ],
        decode_samples=[_decode_sample(c) for c in m.cohorts],
        neighbours=list(m.neighbours),
        decode_fit=decode_doc,
        mixing_samples=[] if m.mixing is None else m.mixing.samples(),
    )
    digest = evidence_sha256(m.before)
    profile = Profile(
        key=key,
        binding=Binding(
            kind=plan.evidence_kind,
            generation=digest if plan.evidence_kind == "identity" else generation(m.before),
            sha256=digest,
        ),
        engine=EngineFacts(
            url=plan.probe.client.base_url,
            model=plan.probe.model,
            root=m.before.get("root"),
            max_model_len=plan.probe.max_model_len,
            version=str(m.before.get("version")),
        ),
        prefill_fit=PrefillFitDoc.model_validate(m.prefill_fit.to_dict()),
        decode_fit=decode_doc,
        colocation=None if m.colocation is None else Colocation(**asdict(m.colocation)),
        samples_sha256=PENDING_SHA256,
        scheduler=plan.scheduler,
        mixing_fit=None
        if m.mixing is None or m.mixing.fit is None
        else MixingFitDoc.model_validate(m.mixing.fit.to_dict()),
    )
    return Measured(profile, samples)


def documents(
    fleet: LoadedFleet, measured: Sequence[Measured]
) -> tuple[ProfileStore, SamplesSidecar]:
    """The live store and sidecar holding ``measured`` (digests filled in by ``write_store``)."""
    return new_documents(
        mode="live",
        fleet_sha256=fleet.sha256,
        generator=generator(),
        profiles=[m.profile for m in measured],
        samples=[m.samples for m in measured],
        samples_name=sidecar_path(fleet.profiles_path).name,
    )
