"""``--refit-samples PATH --out PATH``: refit TTFT from retained samples, keep the decode fits.

The input is a sample sidecar (``profiles.samples.json``, as in the reference); the store beside
it (``profiles.json``) must exist too, because it records each profile's binding and the digest
of its samples, which is what proves the retained samples generation-bound and unaltered. Each
profile's TTFT is refitted from the per-length medians of every retained raw timing with today's
``narwhal_fit.fit_prefill`` and must pass the reference's gates; the decode fits are kept exactly
as recorded. A profile with mixing points (``--mixing``) keeps them, each with its ``work_s``
(``b·L + c·L²``) recomputed from the refitted TTFT, and its mixing fit is refitted from them (none
when too few are valid). The new store and sidecar (mode ``refit``) keep the raw samples and
evidence and record the source sidecar and store with their SHA-256 in ``sources``; they are
``format_version`` 2 exactly when they hold mixing points or a mixing fit.
"""

from __future__ import annotations

from pathlib import Path

import narwhal_fit
from narwhal_fit import FitError, MixingPoint, PrefillFit, fit_mixing, prefill_work_s
from narwhal_profile_cli._errors import ProfileUsageError
from narwhal_profile_cli.results._assemble import generator
from narwhal_profile_cli.results._refit_inputs import (
    check_fresh_out,
    check_membership,
    store_beside,
    verified_input,
    write_fresh_out,
)
from narwhal_profile_cli.sweeps._prefill_gate import FitPrefill, gated_prefill_fit
from narwhal_store import (
    PENDING_SHA256,
    LoadedFleet,
    MixingFitDoc,
    MixingSample,
    PrefillFitDoc,
    Profile,
    ProfileSamples,
    Source,
    WrittenStore,
    new_documents,
)

_CODE = "refit_input"


def refit_from_samples(
    fleet: LoadedFleet,
    samples_path: Path,
    out: Path,
    *,
    fit_prefill: FitPrefill | None = None,
) -> WrittenStore:
    """Refit every profile's TTFT from ``samples_path``; write a fresh store + sidecar at ``out``.

    ``fit_prefill`` defaults to ``narwhal_fit.fit_prefill`` as it is when called. Refused with
    exit 2: an existing or symlinked ``--out``; a sidecar without its store; altered samples or
    evidence (naming the profile); a fleet engine without samples; samples of an engine outside
    the fleet. A refitted TTFT that fails the gates aborts with exit 1.
    """
    fit = fit_prefill if fit_prefill is not None else narwhal_fit.fit_prefill
    check_fresh_out(out)
    what = f"--refit-samples {samples_path}"
    loaded = verified_input(store_beside(samples_path), what=what, code=_CODE)
    check_membership(fleet, loaded, what=what, code=_CODE)
    covered = {p.key.engine for p in loaded.store.profiles}
    for iid in fleet.config.iids():
        if iid not in covered:
            raise ProfileUsageError(
                f"{what}: no samples for engine {iid!r} of fleet {fleet.path}; a refit needs "
                "samples covering every fleet engine",
                code=_CODE,
                engine=iid,
            )
    profiles: list[Profile] = []
    entries: list[ProfileSamples] = []
    for profile in loaded.store.profiles:
        entry = loaded.samples(profile.key)
        refitted = _refit_prefill(profile, entry, fit)
        mixing_fit: MixingFitDoc | None = None
        if entry.mixing_samples:
            mixing = [_rework(sample, refitted) for sample in entry.mixing_samples]
            entry = entry.model_copy(update={"mixing_samples": mixing})
            mixing_fit = _refit_mixing(mixing)
        profiles.append(
            profile.model_copy(
                update={
                    "prefill_fit": PrefillFitDoc.model_validate(refitted.to_dict()),
                    "decode_fit": entry.decode_fit,
                    "samples_sha256": PENDING_SHA256,
                    "mixing_fit": mixing_fit,
                }
            )
        )
        entries.append(entry)
    store, sidecar = new_documents(
        mode="refit",
        fleet_sha256=fleet.sha256,
        generator=generator(),
        profiles=profiles,
        samples=entries,
        sources=[
            Source(
                path=str(loaded.sidecar_path.absolute()),
                sha256=loaded.sidecar_sha256,
                kind="samples",
            ),
            Source(path=str(loaded.path.absolute()), sha256=loaded.sha256, kind="store"),
        ],
    )
    return write_fresh_out(out, store, sidecar)


def _rework(sample: MixingSample, prefill: PrefillFit) -> MixingSample:
    """The mixing point with its prefill work recomputed from the refitted TTFT (a point refused
    before it was sent keeps none if it had none)."""
    if sample.work_s is None:
        return sample
    work = prefill_work_s(prefill.coefficients, sample.prefill_len)
    return sample.model_copy(update={"work_s": work})


def _refit_mixing(samples: list[MixingSample]) -> MixingFitDoc | None:
    """The mixing fit of the valid points, or None when they cannot make one."""
    points = [
        MixingPoint(
            work_s=s.work_s,
            chunks=s.chunks,
            loss_s=s.loss_s,
            prefill_len=s.prefill_len,
            input_len=s.input_len,
        )
        for s in samples
        if s.valid and s.loss_s is not None and s.work_s is not None and s.chunks is not None
    ]
    try:
        return MixingFitDoc.model_validate(fit_mixing(points).to_dict())
    except FitError:
        return None


def _refit_prefill(profile: Profile, entry: ProfileSamples, fit: FitPrefill) -> PrefillFit:
    """Fit the medians of every retained raw TTFT and apply the reference's gates."""
    raw: dict[int, list[float]] = {}
    for sample in entry.prefill_samples:
        raw.setdefault(sample.length, []).extend(sample.ttft_s)
    return gated_prefill_fit(
        raw,
        subject=f"profile {profile.key.label()}",
        iid=profile.key.engine,
        fit=fit,
        refit_code=_CODE,
    )
