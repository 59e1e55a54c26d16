"""What the command was given: profile stores (with their sidecars), freshness probes
(``narwhal-profile --verify``), trial run folders and edge folders (``load_trial.py edge``), read
through narwhal-store and narwhal-trial; the fleet file each store was profiled for."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from narwhal_report._errors import ReportUsageError
from narwhal_store import (
    PROBE_FORMAT,
    FormatError,
    LoadedStore,
    PathAccessError,
    ProbeDocument,
    StoreError,
    load_fleet,
    load_probe,
    lstat_or_none,
    read_store,
)
from narwhal_trial import (
    EdgeRun,
    ReadError,
    TrialRun,
    is_edge_folder,
    is_run_folder,
    read_edge,
    read_run,
)

FLEET_NAMES = ("fleet.json",)
"""Fleet files looked for beside a store and one folder up when no ``--fleet`` is given."""


@dataclass(slots=True)
class Inputs:
    """The stores, runs, edge searches and probes, in the order given, and per store the fleet
    file (or why none)."""

    stores: list[LoadedStore] = field(default_factory=list)
    runs: list[TrialRun] = field(default_factory=list)
    fleets: dict[Path, Path | str] = field(default_factory=dict)
    edges: list[EdgeRun] = field(default_factory=list)
    probes: dict[Path, ProbeDocument] = field(default_factory=dict)

    def probes_of(self, loaded: LoadedStore) -> dict[Path, ProbeDocument]:
        """The probes that compared their engines with ``loaded`` (its SHA-256), oldest first."""
        found = {p: d for p, d in self.probes.items() if d.profiles_sha256 == loaded.sha256}
        return dict(sorted(found.items(), key=lambda item: _when(item[1])))


def _lstat(path: Path, what: str) -> os.stat_result | None:
    """``path.lstat()``, None when nothing is there; a path that cannot be looked at (a folder on
    its way that cannot be entered) is a ReportUsageError naming it (``what``: how it was given)."""
    try:
        return lstat_or_none(path)
    except PathAccessError as exc:
        raise ReportUsageError(f"{what}{path}: {exc.reason}") from exc


def _is_file(path: Path, what: str) -> bool:
    """``path.is_file()`` (following a symlink), refusing a path that cannot be looked at."""
    if _lstat(path, what) is None:
        return False
    try:
        return path.is_file()
    except OSError as exc:
        raise ReportUsageError(f"{what}{path}: cannot look there ({exc.strerror or exc})") from exc


def read_inputs(paths: Sequence[Path], fleet: Path | None = None) -> Inputs:
    """Read every path; ``ReportUsageError`` names the first that is missing, cannot be looked at,
    or is neither a store, a run folder nor an edge folder (or is one that cannot be read)."""
    if not paths:
        raise ReportUsageError(
            "give at least one profile store, freshness probe, trial run folder or edge folder"
        )
    found = Inputs()
    seen: set[Path] = set()
    for path in paths:
        if _lstat(path, "") is None:
            raise ReportUsageError(f"{path}: no such file or folder")
        key = path.resolve()
        if key in seen:
            continue
        seen.add(key)
        try:
            edge_folder = is_edge_folder(path)
            run_folder = not edge_folder and is_run_folder(path)
        except OSError as exc:
            raise ReportUsageError(f"{path}: cannot look in it ({exc.strerror or exc})") from exc
        if edge_folder:
            try:
                found.edges.append(read_edge(path))
            except ReadError as exc:
                raise ReportUsageError(f"{path}: not a readable edge search: {exc}") from exc
        elif run_folder:
            try:
                found.runs.append(read_run(path))
            except ReadError as exc:
                raise ReportUsageError(f"{path}: not a readable trial run: {exc}") from exc
        elif _is_file(path, "") and _is_probe(path):
            found.probes[path] = _read_probe(path)
        elif _is_file(path, ""):
            try:
                found.stores.append(read_store(path))
            except StoreError as exc:
                raise ReportUsageError(f"{path}: not a readable profile store: {exc}") from exc
        else:
            raise ReportUsageError(
                f"{path}: neither a profile store nor a trial run folder (no manifest.json) nor "
                "an edge folder (no edge.json)"
            )
    if fleet is not None and not _is_file(fleet, "--fleet "):
        raise ReportUsageError(f"--fleet {fleet}: no such file")
    for loaded in found.stores:
        found.fleets[loaded.path] = fleet_of(loaded, fleet)
    return found


def _is_probe(path: Path) -> bool:
    """The file says it is a freshness probe (its ``format``); anything else, JSON or not, is
    left for the store's reader to judge."""
    try:
        doc = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return False
    return isinstance(doc, dict) and doc.get("format") == PROBE_FORMAT


def _read_probe(path: Path) -> ProbeDocument:
    """The probe at ``path``; ``ReportUsageError`` naming the file and the JSON path of what is
    wrong in it."""
    try:
        return load_probe(path)
    except FormatError as exc:
        where = f"{exc.json_path}: " if exc.json_path else ""
        raise ReportUsageError(
            f"{path}: not a readable freshness probe: {where}{exc.message}"
        ) from exc
    except StoreError as exc:
        raise ReportUsageError(f"{path}: not a readable freshness probe: {exc}") from exc


def _when(probe: ProbeDocument) -> datetime:
    """When the probe ended, comparable across time zones."""
    return datetime.fromisoformat(probe.created_at)


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
        try:
            if not candidate.is_file():
                continue
        except OSError:  # a folder that cannot be entered holds no fleet file we could read
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
    info = _lstat(out, "--out ")
    if info is not None and stat.S_ISLNK(info.st_mode):
        raise ReportUsageError(f"--out {out}: it is a symlink; refusing to write through it")
    if info is not None and not stat.S_ISREG(info.st_mode):
        raise ReportUsageError(f"--out {out}: it exists and is not a regular file")
    folder = out.parent
    if not stat.S_ISDIR(_folder_mode(folder, out)):
        raise ReportUsageError(f"--out {out}: folder {folder} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ReportUsageError(f"--out {out}: folder {folder} is not writable")


def _folder_mode(folder: Path, out: Path) -> int:
    """The mode of ``--out``'s folder (a symlink to a folder will do); 0 when there is none."""
    try:
        return folder.stat().st_mode
    except (FileNotFoundError, NotADirectoryError):
        return 0
    except OSError as exc:
        raise ReportUsageError(
            f"--out {out}: cannot look at folder {folder} ({exc.strerror or exc})"
        ) from exc
