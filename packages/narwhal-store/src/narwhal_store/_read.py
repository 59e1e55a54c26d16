"""Reading a store with its sidecar, verifying that the two belong together."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from narwhal_store._canonical import canonical_json, sha256_hex
from narwhal_store._errors import FormatError, IntegrityError
from narwhal_store._loading import parse_json, read_json, validate_doc
from narwhal_store._paths import pending_sidecar_name, sidecar_path
from narwhal_store._profiles import Profile, ProfileKey, ProfileStore
from narwhal_store._samples import ProfileSamples, SamplesSidecar

__all__ = ["LoadedStore", "read_sidecar", "read_store", "samples_digest"]

_ATTEMPTS = 2  # a second look covers a writer that committed between our two reads


@dataclass(frozen=True, slots=True)
class LoadedStore:
    """A store and its sidecar as read (``recovered``: the sidecar came from the pending name a
    crashed write left behind)."""

    store: ProfileStore
    sidecar: SamplesSidecar
    path: Path
    sha256: str
    sidecar_path: Path
    sidecar_sha256: str
    recovered: bool = False

    def profile(self, engine: str) -> Profile:
        """The single profile of ``engine``; ``KeyError`` when it has none or several."""
        found = self.store.find(engine)
        if len(found) != 1:
            raise KeyError(f"{self.path}: {len(found)} profiles for engine {engine!r}")
        return found[0]

    def samples(self, key: ProfileKey) -> ProfileSamples:
        """The sidecar entry of ``key``; ``KeyError`` when absent."""
        entry = self.sidecar.find(key)
        if entry is None:
            raise KeyError(f"{self.sidecar_path}: no samples for {key.label()}")
        return entry


def samples_digest(entry: ProfileSamples | dict[str, Any]) -> str:
    """SHA-256 of the canonical JSON of one sidecar entry (a profile's ``samples_sha256``)."""
    doc = entry.model_dump(mode="json") if isinstance(entry, ProfileSamples) else entry
    return sha256_hex(canonical_json(doc))


def read_sidecar(path: str | Path) -> SamplesSidecar:
    """Read and validate a sidecar file on its own (no store, no hash check)."""
    _, raw = read_json(path)
    return validate_doc(path, SamplesSidecar, raw)


def _read_bytes(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise FormatError(path, "", f"cannot read: {exc.strerror or exc}") from exc


class _Sidecar(NamedTuple):
    path: Path
    data: bytes
    sha256: str
    recovered: bool


def _locate_sidecar(side_path: Path, expected: str) -> _Sidecar | None:
    """The sidecar beside the store when its SHA-256 is ``expected``; else the pending sidecar a
    crashed write left under that SHA-256; else the one beside the store as it is (None: absent)."""
    data = _read_bytes(side_path)
    beside = None if data is None else _Sidecar(side_path, data, sha256_hex(data), False)
    if beside is not None and beside.sha256 == expected:
        return beside
    pending = side_path.with_name(pending_sidecar_name(side_path.name, expected))
    pending_data = _read_bytes(pending) if not pending.is_symlink() else None
    if pending_data is not None and sha256_hex(pending_data) == expected:
        return _Sidecar(pending, pending_data, expected, True)
    return beside


def read_store(path: str | Path, *, verify: bool = True) -> LoadedStore:
    """Read a store and the sidecar beside it.

    With ``verify`` (the default): the sidecar must exist, its SHA-256 must equal the store's
    ``samples.sha256``, every store profile must have a sidecar entry (and vice versa), and each
    profile's ``samples_sha256`` must equal the digest of its entry; otherwise ``IntegrityError``
    says which (a sidecar whose SHA-256 differs also names the first profile whose samples no
    longer match, when the sidecar still parses). ``verify=False`` still needs a readable sidecar
    but checks no digest. Either way, a sidecar left under its pending name by a write that crashed
    after committing the store is read when it is the one the store records (``recovered``).
    """
    store_path = Path(path)
    side_path = sidecar_path(store_path)
    attempt = 1
    while True:
        store_bytes, store_raw = read_json(store_path)
        store = validate_doc(store_path, ProfileStore, store_raw)
        found = _locate_sidecar(side_path, store.samples.sha256)
        if found is not None and (not verify or found.sha256 == store.samples.sha256):
            break
        if attempt >= _ATTEMPTS:
            raise _sidecar_error(store, found, store_path, side_path)
        attempt += 1
    side_raw = parse_json(found.path, found.data)
    sidecar = validate_doc(found.path, SamplesSidecar, side_raw)
    if verify:
        problem = _entries_problem(store, sidecar, side_raw, store_path, found.path)
        if problem is not None:
            raise IntegrityError(problem)
    return LoadedStore(
        store,
        sidecar,
        store_path,
        sha256_hex(store_bytes),
        found.path,
        found.sha256,
        found.recovered,
    )


def _sidecar_error(
    store: ProfileStore, found: _Sidecar | None, store_path: Path, side_path: Path
) -> IntegrityError:
    """The refusal of a missing sidecar, or of one whose SHA-256 is not the store's record."""
    if found is None:
        return IntegrityError(f"sidecar {side_path} missing")
    message = (
        f"sidecar {side_path} has SHA-256 {found.sha256} "
        f"but the store records {store.samples.sha256}"
    )
    try:
        side_raw = parse_json(side_path, found.data)
        sidecar = validate_doc(side_path, SamplesSidecar, side_raw)
    except FormatError:
        return IntegrityError(message)
    problem = _entries_problem(store, sidecar, side_raw, store_path, side_path)
    return IntegrityError(message if problem is None else f"{message}; {problem}")


def _entries_problem(
    store: ProfileStore, sidecar: SamplesSidecar, side_raw: Any, store_path: Path, side_path: Path
) -> str | None:
    """Why the store's profiles and the sidecar's entries do not match one to one with matching
    samples digests, or None when they do."""
    raw_entries = side_raw["profiles"]
    by_key = {e.key.ident(): raw for e, raw in zip(sidecar.profiles, raw_entries, strict=True)}
    for profile in store.profiles:
        raw = by_key.pop(profile.key.ident(), None)
        if raw is None:
            return f"{store_path}: profile {profile.key.label()} has no samples in {side_path}"
        digest = samples_digest(raw)
        if digest != profile.samples_sha256:
            return (
                f"{store_path}: samples of profile {profile.key.label()} do not match: "
                f"{side_path} entry has SHA-256 {digest}, "
                f"the store records {profile.samples_sha256}"
            )
    if by_key:
        extra = next(e for e in sidecar.profiles if e.key.ident() in by_key)
        return f"{side_path}: samples of {extra.key.label()} have no profile in {store_path}"
    return None
