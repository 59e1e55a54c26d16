"""Merging separately measured profile stores into one (the reference's ``--merge``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from narwhal_store._canonical import canonical_json, sha256_hex
from narwhal_store._documents import new_documents
from narwhal_store._errors import MergeError, StoreError
from narwhal_store._fields import Generator
from narwhal_store._fleet import LoadedFleet
from narwhal_store._profiles import Profile, ProfileStore
from narwhal_store._read import LoadedStore, read_store
from narwhal_store._samples import ProfileSamples, SamplesSidecar, Source

__all__ = ["evidence_problem", "merge_stores"]

_MIN_INPUTS = 2


def evidence_problem(profile: Profile, entry: ProfileSamples) -> str | None:
    """Why ``entry``'s evidence does not back ``profile``'s binding, or None when it does.

    Both evidence documents must be present and equal (same canonical SHA-256), the binding's
    ``sha256`` must be that digest, and an identity binding's ``generation`` too.
    """
    before, after = entry.evidence.before, entry.evidence.after
    if not before or not after:
        return "evidence before/after missing from the sidecar"
    before_sha = sha256_hex(canonical_json(before))
    after_sha = sha256_hex(canonical_json(after))
    if before_sha != after_sha:
        return f"evidence changed during the sweep (before {before_sha}, after {after_sha})"
    if profile.binding.sha256 != before_sha:
        return (
            f"binding SHA-256 {profile.binding.sha256} does not match the sidecar's evidence "
            f"({before_sha})"
        )
    if profile.binding.kind == "identity" and profile.binding.generation != before_sha:
        return f"identity generation {profile.binding.generation} does not match its evidence"
    return None


def _default_generator() -> Generator:
    from importlib.metadata import PackageNotFoundError, version

    try:
        own = version("narwhal-store")
    except PackageNotFoundError:
        own = "unknown"
    return Generator(name="narwhal-store", version=own)


def _read_input(path: Path) -> LoadedStore:
    try:
        loaded = read_store(path, verify=True)
    except StoreError as exc:
        raise MergeError(f"input {path}: {exc}") from exc
    if loaded.recovered:
        raise MergeError(
            f"input {path}: its sidecar exists only as {loaded.sidecar_path.name}, left by an "
            "interrupted write; finish it first (narwhal_store.finish_pending)"
        )
    return loaded


def merge_stores(
    inputs: Sequence[str | Path],
    fleet: LoadedFleet,
    *,
    generator: Generator | None = None,
    created_at: str | None = None,
) -> tuple[ProfileStore, SamplesSidecar]:
    """Combine ≥ 2 verified stores into one store and sidecar (mode ``merge``).

    Refused with ``MergeError``: fewer than two inputs; an input that fails verification; a profile
    whose evidence does not back its binding (:func:`evidence_problem`); a profile for an engine not
    in ``fleet``; the same key in two inputs; a fleet engine no input covers. The sidecar's
    ``sources`` record each input store and sidecar with its SHA-256. Write the result with
    ``write_store(..., mode="fresh")`` (which fills in the digests).
    """
    if len(inputs) < _MIN_INPUTS:
        raise MergeError(f"a merge needs at least two input stores (got {len(inputs)})")
    known = set(fleet.config.iids())
    seen: dict[object, Path] = {}
    profiles: list[Profile] = []
    entries: list[ProfileSamples] = []
    sources: list[Source] = []
    for raw_path in inputs:
        path = Path(raw_path)
        loaded = _read_input(path)
        for profile in loaded.store.profiles:
            label = profile.key.label()
            if profile.key.engine not in known:
                raise MergeError(
                    f"input {path}: profile {label} is for engine {profile.key.engine!r}, "
                    f"which is not in the fleet {fleet.path}"
                )
            entry = loaded.samples(profile.key)
            problem = evidence_problem(profile, entry)
            if problem is not None:
                raise MergeError(f"input {path}: profile {label}: {problem}")
            ident = profile.key.ident()
            if ident in seen:
                raise MergeError(f"profile {label} occurs in both {seen[ident]} and {path}")
            seen[ident] = path
            profiles.append(profile)
            entries.append(entry)
        sources.append(Source(path=str(path.absolute()), sha256=loaded.sha256, kind="store"))
        sources.append(
            Source(
                path=str(loaded.sidecar_path.absolute()),
                sha256=loaded.sidecar_sha256,
                kind="samples",
            )
        )
    covered = {p.key.engine for p in profiles}
    for iid in fleet.config.iids():
        if iid not in covered:
            raise MergeError(f"engine {iid!r} of fleet {fleet.path} is not covered by any input")
    return new_documents(
        mode="merge",
        fleet_sha256=fleet.sha256,
        generator=generator or _default_generator(),
        profiles=profiles,
        samples=entries,
        sources=sources,
        created_at=created_at,
    )
