"""Inputs of refits and merges: a store with its sidecar, checked profile by profile.

The store is read without verification (``read_store(verify=False)``, which still recovers a
sidecar a crashed write left pending); then each profile's samples digest, evidence, raw prefill
timings and decode fit are checked, so the refusal names the input *and* the profile at fault (also
as ``engine`` in the JSON error); the whole-file hash comes last and catches edits outside the
profile entries. Every refusal is a usage error (exit 2): the operator handed the command an input
it cannot trust. An input whose write was interrupted between its two renames (the sidecar exists
only under its pending name) is first finished (``narwhal_store.finish_pending``): the pending
sidecar the store records is renamed into place, so the recorded source paths are the usual ones.
"""

from __future__ import annotations

from pathlib import Path

from narwhal_profile_cli._errors import ProfileUsageError
from narwhal_store import (
    LoadedFleet,
    LoadedStore,
    PathAccessError,
    ProfileStore,
    SamplesSidecar,
    StoreError,
    WrittenStore,
    check_destination,
    evidence_problem,
    finish_pending,
    lstat_or_none,
    read_store,
    samples_digest,
    sidecar_path,
    write_store,
)

SAMPLES_SUFFIX = ".samples.json"


def check_fresh_out(out: Path) -> None:
    """Refuse an ``--out`` whose store or sidecar exists, or that is (or sits in) a symlink."""
    try:
        check_destination(out, mode="fresh")
    except StoreError as exc:  # DestinationError included
        raise ProfileUsageError(
            f"--out {out}: {exc} (refits and merges require fresh outputs)", code="destination"
        ) from exc


def write_fresh_out(out: Path, store: ProfileStore, sidecar: SamplesSidecar) -> WrittenStore:
    """Write a refit's or merge's result as a fresh store + sidecar at ``--out``."""
    try:
        return write_store(out, store, sidecar, mode="fresh")
    except StoreError as exc:
        raise ProfileUsageError(f"--out {out}: {exc}", code="destination") from exc


def store_beside(samples: Path) -> Path:
    """The store a ``--refit-samples`` sidecar belongs to: ``X.samples.json`` → ``X.json``."""
    if not samples.name.endswith(SAMPLES_SUFFIX) or samples.name == SAMPLES_SUFFIX:
        raise ProfileUsageError(
            f"--refit-samples {samples}: expected a sample sidecar named *{SAMPLES_SUFFIX}",
            code="refit_input",
        )
    store = samples.with_name(samples.name[: -len(SAMPLES_SUFFIX)] + ".json")
    what = f"--refit-samples {samples}"
    if not _is_file(samples, what, "refit_input") and _is_file(store, what, "refit_input"):
        _finish(store, what=what, code="refit_input")  # may bring the sidecar into place
    if not _is_file(samples, what, "refit_input"):
        raise ProfileUsageError(
            f"--refit-samples {samples}: no such sidecar file", code="refit_input"
        )
    if not _is_file(store, what, "refit_input"):
        raise ProfileUsageError(
            f"--refit-samples {samples}: the store {store} beside it is missing; it records the "
            "bindings and samples digests that prove the samples intact",
            code="refit_input",
        )
    return store


def _is_file(path: Path, what: str, code: str) -> bool:
    """``path.is_file()``; a path that cannot be looked at (a folder on its way that cannot be
    entered) is a usage error naming it, not a traceback."""
    try:
        return lstat_or_none(path) is not None and path.is_file()
    except PathAccessError as exc:
        raise ProfileUsageError(f"{what}: {exc}", code=code) from exc
    except OSError as exc:  # a symlink into a folder that cannot be entered
        raise ProfileUsageError(f"{what}: {PathAccessError(path, exc)}", code=code) from exc


def _finish(store_path: Path, *, what: str, code: str) -> None:
    """Finish an interrupted write of an input store (its sidecar only under the pending name)."""
    try:
        finish_pending(store_path)
    except StoreError as exc:
        raise ProfileUsageError(f"{what}: {exc}", code=code) from exc


def verified_input(store_path: Path, *, what: str, code: str) -> LoadedStore:
    """Read ``store_path`` with its sidecar and check every profile's samples and evidence.

    ``what`` names the input in messages (``--merge input a.json``). Refused: a missing store or
    sidecar, a profile without a sidecar entry or without raw prefill timings, a samples digest
    that no longer matches the store's record, evidence that changed during the sweep or does not
    hash to the binding, a sidecar entry without a profile, a sidecar whose SHA-256 differs from
    the store's record.
    """
    side = sidecar_path(store_path)
    if not _is_file(store_path, what, code):
        raise ProfileUsageError(f"{what}: no such store file", code=code)
    _finish(store_path, what=what, code=code)
    if not _is_file(side, what, code):
        raise ProfileUsageError(f"{what}: its sidecar {side} is missing", code=code)
    try:
        loaded = read_store(store_path, verify=False)
    except StoreError as exc:
        raise ProfileUsageError(f"{what}: {exc}", code=code) from exc
    seen: set[object] = set()
    for profile in loaded.store.profiles:
        label = profile.key.label()
        entry = loaded.sidecar.find(profile.key)
        if entry is None:
            raise ProfileUsageError(
                f"{what}: profile {label} has no samples in {side}",
                code=code,
                engine=profile.key.engine,
            )
        seen.add(profile.key.ident())
        digest = samples_digest(entry)
        if digest != profile.samples_sha256:
            raise ProfileUsageError(
                f"{what}: profile {label}: its samples in {side} were altered (SHA-256 {digest}, "
                f"the store records {profile.samples_sha256})",
                code=code,
                engine=profile.key.engine,
            )
        problem = evidence_problem(profile, entry)
        if problem is not None:
            raise ProfileUsageError(
                f"{what}: profile {label}: {problem}", code=code, engine=profile.key.engine
            )
        if not entry.prefill_samples:
            raise ProfileUsageError(
                f"{what}: profile {label} has no raw prefill timings in {side}",
                code=code,
                engine=profile.key.engine,
            )
        if entry.decode_fit != profile.decode_fit:
            raise ProfileUsageError(
                f"{what}: profile {label}: the decode fit in the store differs from the one "
                f"recorded in {side}",
                code=code,
                engine=profile.key.engine,
            )
    for entry in loaded.sidecar.profiles:
        if entry.key.ident() not in seen:
            raise ProfileUsageError(
                f"{what}: samples of {entry.key.label()} in {side} have no profile in the store",
                code=code,
                engine=entry.key.engine,
            )
    if loaded.sidecar_sha256 != loaded.store.samples.sha256:
        raise ProfileUsageError(
            f"{what}: sidecar {side} has SHA-256 {loaded.sidecar_sha256} but the store records "
            f"{loaded.store.samples.sha256}",
            code=code,
        )
    return loaded


def check_membership(fleet: LoadedFleet, loaded: LoadedStore, *, what: str, code: str) -> None:
    """Refuse profiles of engines the fleet does not configure (the fleet defines membership)."""
    known = set(fleet.config.iids())
    for profile in loaded.store.profiles:
        if profile.key.engine not in known:
            raise ProfileUsageError(
                f"{what}: profile {profile.key.label()} is for engine {profile.key.engine!r}, "
                f"which is not in the fleet {fleet.path}",
                code=code,
                engine=profile.key.engine,
            )
