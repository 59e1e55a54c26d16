"""Writing a store and its sidecar together so that readers always see a matching pair.

The scheme (README "Crash safety"):

1. Both documents are serialised first; each profile's ``samples_sha256`` and the sidecar's
   SHA-256 are computed into the store.
2. The new sidecar is written to a temporary file, fsynced, and renamed to its *pending* name
   ``.X.samples.json.<sha256[:16]>.pending`` beside the store (content-addressed).
3. The new store is written to a temporary file, fsynced, and renamed over ``X.json``: the commit
   point. Before it, the old store and old sidecar are untouched; after it, the store names a
   sidecar that exists under the pending name.
4. The pending sidecar is renamed to ``X.samples.json`` (roll forward); stale pending and
   temporary files of earlier crashed writes of this store (``.X.json.<hex>.tmp``,
   ``.X.samples.json.<hex>.tmp``, ``.X.samples.json.<hex>.pending``) are removed.

:func:`read_store` looks for the pending name when ``X.samples.json`` is missing or does not match,
so a crash between 3 and 4 still reads as the new, consistent pair; :func:`finish_pending` does
step 4 for such a store. The folder is fsynced after
every rename. In ``fresh`` mode the store and sidecar appear through hard links, which fail if the
name exists, instead of renames.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import orjson

from narwhal_store._atomic import Folder, check_folder, check_target
from narwhal_store._canonical import canonical_json, sha256_hex
from narwhal_store._errors import FormatError, IntegrityError, StoreError
from narwhal_store._loading import validate_doc
from narwhal_store._paths import PENDING_SUFFIX, pending_sidecar_name, sidecar_path
from narwhal_store._profiles import ProfileStore
from narwhal_store._read import read_store, samples_digest
from narwhal_store._samples import SamplesSidecar

__all__ = ["WrittenStore", "check_destination", "dump_document", "finish_pending", "write_store"]

WriteMode = Literal["fresh", "replace"]
_DUMP_OPTIONS = orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS | orjson.OPT_APPEND_NEWLINE


@dataclass(frozen=True, slots=True)
class WrittenStore:
    """What :func:`write_store` wrote: paths, SHA-256 of each file, and the store as written."""

    path: Path
    sha256: str
    sidecar_path: Path
    sidecar_sha256: str
    store: ProfileStore


def dump_document(doc: dict[str, Any]) -> bytes:
    """Human-readable JSON (2-space indent, sorted keys, final newline) of a plain JSON dict.

    orjson writes NaN as null, so callers check values with :func:`canonical_json` first.
    """
    return orjson.dumps(doc, option=_DUMP_OPTIONS)


def _json_checked(doc: dict[str, Any], where: Path, what: str) -> None:
    """Refuse values JSON cannot hold exactly (NaN, infinities, non-JSON types)."""
    try:
        canonical_json(doc)
    except (ValueError, TypeError) as exc:
        raise FormatError(where, "", f"cannot write the {what}: {exc}") from exc


def _check_mode(mode: str) -> None:
    if mode not in ("fresh", "replace"):
        raise StoreError(f"write mode must be 'fresh' or 'replace', not {mode!r}")


def check_destination(store_path: str | Path, *, mode: WriteMode) -> None:
    """Refuse an unusable destination before any measurement: a symlinked store, sidecar or
    folder, an existing store or sidecar in ``fresh`` mode, a non-regular file, an unwritable
    folder. Missing folders are fine (``write_store`` creates them). Raises ``DestinationError``."""
    _check_mode(mode)
    path = Path(store_path)
    check_folder(path.parent)
    for target in (path, sidecar_path(path)):
        try:
            info = target.lstat()
        except FileNotFoundError:
            continue
        check_target(info, target, fresh=mode == "fresh")


def _prepare(
    store: ProfileStore, sidecar: SamplesSidecar, sidecar_name: str, where: Path
) -> tuple[bytes, bytes, ProfileStore, str]:
    """Serialise the sidecar, fill the digests into the store and serialise it."""
    if store.fleet_sha256 != sidecar.fleet_sha256:
        raise IntegrityError(
            "store and sidecar name different fleets "
            f"({store.fleet_sha256} vs {sidecar.fleet_sha256})"
        )
    side_doc = sidecar.model_dump()
    _json_checked(side_doc, where, "sidecar")
    digests = {
        entry.key.ident(): samples_digest(raw)
        for entry, raw in zip(sidecar.profiles, side_doc["profiles"], strict=True)
    }
    store_doc = store.model_dump()
    for profile, raw in zip(store.profiles, store_doc["profiles"], strict=True):
        digest = digests.pop(profile.key.ident(), None)
        if digest is None:
            raise IntegrityError(f"profile {profile.key.label()} has no entry in the sidecar")
        raw["samples_sha256"] = digest
    if digests:
        extra = next(e for e in sidecar.profiles if e.key.ident() in digests)
        raise IntegrityError(f"sidecar entry {extra.key.label()} has no profile in the store")
    _json_checked(store_doc, where, "store")
    side_bytes = dump_document(side_doc)
    side_sha = sha256_hex(side_bytes)
    store_doc["samples"] = {"path": sidecar_name, "sha256": side_sha}
    final = validate_doc(where, ProfileStore, store_doc)
    return side_bytes, dump_document(store_doc), final, side_sha


def write_store(
    store_path: str | Path,
    store: ProfileStore,
    sidecar: SamplesSidecar,
    *,
    mode: WriteMode,
) -> WrittenStore:
    """Write ``store`` and ``sidecar`` (at :func:`sidecar_path`) as a matching pair.

    ``store.samples`` and each profile's ``samples_sha256`` are computed here (pass
    ``PENDING_SHA256`` placeholders). ``mode="fresh"`` refuses existing files; ``"replace"``
    replaces them atomically. Symlinked destinations or folders are refused in both modes; missing
    folders are created. An I/O failure is a ``StoreError`` (the underlying ``OSError`` is its
    cause). See the module docstring for the crash-safety scheme.
    """
    _check_mode(mode)
    fresh = mode == "fresh"
    path = Path(store_path)
    side_path = sidecar_path(path)
    store_name, side_name = path.name, side_path.name
    side_bytes, store_bytes, final, side_sha = _prepare(store, sidecar, side_name, path)
    pending = pending_sidecar_name(side_name, side_sha)
    temps: list[str] = []
    with Folder(path.parent, create=True) as folder:
        try:
            for name in (store_name, side_name):
                check_target(folder.lstat(name), path.parent / name, fresh=fresh)
            temps.append(folder.write_temp(side_name, side_bytes))
            folder.replace(temps[-1], pending)
            temps.append(folder.write_temp(store_name, store_bytes))
            check_target(folder.lstat(store_name), path, fresh=fresh)
            if fresh:
                folder.publish_new(temps[-1], store_name)
            else:
                folder.replace(temps[-1], store_name)
            # Committed: the store names the pending sidecar; roll it forward.
            check_target(folder.lstat(side_name), side_path, fresh=fresh)
            if fresh:
                folder.publish_new(pending, side_name)
            else:
                folder.replace(pending, side_name)
            _remove_leftovers(folder, store_name, side_name)
        except OSError as exc:  # a full disk, a vanished folder, ...: the old pair stays valid
            raise StoreError(f"cannot write {path}: {exc.strerror or exc}") from exc
        finally:
            for name in temps:
                folder.remove(name)
    return WrittenStore(path, sha256_hex(store_bytes), side_path, side_sha, final)


def finish_pending(store_path: str | Path) -> bool:
    """Finish a write that was interrupted between its two renames (step 4 above): when the store's
    recorded sidecar exists only under its pending name, rename it to ``X.samples.json`` and remove
    the write's leftovers. True when it did; False when there was nothing to finish. Raises what
    ``read_store(verify=False)`` raises, and ``StoreError`` when the rename fails."""
    path = Path(store_path)
    loaded = read_store(path, verify=False)
    if not loaded.recovered:
        return False
    side_path = sidecar_path(path)
    pending = loaded.sidecar_path.name
    try:
        with Folder(path.parent, create=False) as folder:
            check_target(folder.lstat(pending), loaded.sidecar_path, fresh=False)
            check_target(folder.lstat(side_path.name), side_path, fresh=False)
            folder.replace(pending, side_path.name)
            _remove_leftovers(folder, path.name, side_path.name)
    except OSError as exc:
        raise StoreError(
            f"cannot finish the interrupted write of {path}: {exc.strerror or exc}"
        ) from exc
    return True


def _leftover_pattern(store_name: str, side_name: str) -> re.Pattern[str]:
    """Names of this store's temporary files (``Folder.write_temp``) and pending sidecars."""
    names = "|".join(re.escape(n) for n in (store_name, side_name))
    return re.compile(
        rf"\.(?:{names})\.[0-9a-f]{{12}}\.tmp|\.{re.escape(side_name)}\.[0-9a-f]{{16}}"
        + re.escape(PENDING_SUFFIX)
    )


def _remove_leftovers(folder: Folder, store_name: str, side_name: str) -> None:
    """Remove what earlier interrupted writes of this store left: temporary files and pending
    sidecars (called once this write has committed and rolled forward)."""
    pattern = _leftover_pattern(store_name, side_name)
    stale = [n for n in folder.names() if pattern.fullmatch(n)]
    for name in stale:
        folder.remove(name)
    if stale:
        folder.sync()
