"""What the command was given: profile stores (with their sidecars) and trial run folders, read
through narwhal-store and narwhal-trial; the fleet file each store was profiled for."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from narwhal_report._errors import ReportUsageError
from narwhal_store import LoadedStore, StoreError, load_fleet, read_store
from narwhal_trial import ReadError, TrialRun, is_run_folder, read_run

FLEET_NAMES = ("fleet.json",)
"""Fleet files looked for beside a store and one folder up when no ``--fleet`` is given."""


@dataclass(slots=True)
class Inputs:
    """The stores and runs, in the order given, and per store the fleet file (or why none)."""

    stores: list[LoadedStore] = field(default_factory=list)
    runs: list[TrialRun] = field(default_factory=list)
    fleets: dict[Path, Path | str] = field(default_factory=dict)


def read_inputs(paths: Sequence[Path], fleet: Path | None = None) -> Inputs:
    """Read every path; ``ReportUsageError`` names the first that is missing or neither a store
    nor a run folder (or is one that cannot be read)."""
    if not paths:
        raise ReportUsageError("give at least one profile store or trial run folder")
    found = Inputs()
    seen: set[Path] = set()
    for path in paths:
        if not path.exists() and not path.is_symlink():
            raise ReportUsageError(f"{path}: no such file or folder")
        key = path.resolve()
        if key in seen:
            continue
        seen.add(key)
        if is_run_folder(path):
            try:
                found.runs.append(read_run(path))
            except ReadError as exc:
                raise ReportUsageError(f"{path}: not a readable trial run: {exc}") from exc
        elif path.is_file():
            try:
                found.stores.append(read_store(path))
            except StoreError as exc:
                raise ReportUsageError(f"{path}: not a readable profile store: {exc}") from exc
        else:
            raise ReportUsageError(
                f"{path}: neither a profile store nor a trial run folder (no manifest.json)"
            )
    if fleet is not None and not fleet.is_file():
        raise ReportUsageError(f"--fleet {fleet}: no such file")
    for loaded in found.stores:
        found.fleets[loaded.path] = fleet_of(loaded, fleet)
    return found


def fleet_of(loaded: LoadedStore, given: Path | None) -> Path | str:
    """The fleet file whose SHA-256 is the store's ``fleet_sha256`` (``given``, else a
    ``fleet.json`` beside the store or one folder up), or why there is none."""
    folder = loaded.path.parent
    candidates = (
        [given]
        if given is not None
        else [d / name for d in (folder, folder.parent) for name in FLEET_NAMES]
    )
    for candidate in candidates:
        if not candidate.is_file():
            continue
        try:
            sha = load_fleet(candidate).sha256
        except StoreError as exc:
            if given is not None:
                raise ReportUsageError(f"--fleet {given}: {exc}") from exc
            continue
        if sha == loaded.store.fleet_sha256:
            return candidate
        if given is not None:
            return f"--fleet {given} is not the fleet {loaded.path.name} was profiled for"
    return "no fleet file of this store found (give --fleet)"


def check_out(out: Path) -> None:
    """Refuse an --out that cannot be written, before anything is drawn."""
    if out.is_symlink():
        raise ReportUsageError(f"--out {out}: it is a symlink; refusing to write through it")
    if out.exists() and not out.is_file():
        raise ReportUsageError(f"--out {out}: it exists and is not a regular file")
    folder = out.parent
    if not folder.is_dir():
        raise ReportUsageError(f"--out {out}: folder {folder} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ReportUsageError(f"--out {out}: folder {folder} is not writable")
