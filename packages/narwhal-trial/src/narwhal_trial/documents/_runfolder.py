"""Reading a finished run folder back: ``manifest.json``, ``requests.jsonl``, ``summary.json`` and
(when the run read the server's pages) ``server.json`` through their published models (what a
report or a later analysis reads, never by hand)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from narwhal_trial._errors import ReadError
from narwhal_trial._files import read_regular
from narwhal_trial.documents._records import Manifest, RequestRecord, Summary
from narwhal_trial.documents._server import ServerDoc

MANIFEST_FILE = "manifest.json"
REQUESTS_FILE = "requests.jsonl"
SUMMARY_FILE = "summary.json"
SERVER_FILE = "server.json"

M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True, slots=True)
class TrialRun:
    """One run folder as read: its manifest, every request record and its summary."""

    path: Path
    manifest: Manifest
    records: list[RequestRecord]
    summary: Summary
    server: ServerDoc | None = None
    """``server.json``: each page's deltas over the run (None: older runs, --no-server-metrics)"""


def is_run_folder(path: Path) -> bool:
    """True when ``path`` is a folder (not a symlink) holding a run's ``manifest.json``."""
    return path.is_dir() and not path.is_symlink() and (path / MANIFEST_FILE).is_file()


def read_document(path: Path, model: type[M]) -> M:
    """A JSON document of ``model``; ``ReadError`` names the file (and the first bad field)."""
    try:
        data = read_regular(path)
    except OSError as exc:
        raise ReadError(f"cannot read {path}: {exc.strerror or exc}") from exc
    try:
        return model.model_validate_json(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(document)"
        raise ReadError(f"{path}: {where}: {first['msg']}") from exc


def read_run(path: Path) -> TrialRun:
    """Read a run folder; ``ReadError`` names the file (and the field) that is missing or invalid.

    The records must belong to the manifest's run, one per planned offer at most.
    """
    if not path.is_dir():
        raise ReadError(f"{path} is not a run folder")
    manifest = read_document(path / MANIFEST_FILE, Manifest)
    summary = read_document(path / SUMMARY_FILE, Summary)
    records = read_requests(path / REQUESTS_FILE)
    if summary.run_id != manifest.run_id:
        raise ReadError(
            f"{path}: summary.json is of run {summary.run_id}, manifest.json of {manifest.run_id}"
        )
    foreign = [r.request_id for r in records if not r.request_id.startswith(manifest.run_id + "-")]
    if foreign:
        raise ReadError(
            f"{path / REQUESTS_FILE}: {len(foreign)} record(s) of another run (first "
            f"{foreign[0]}), not of {manifest.run_id}"
        )
    server_path = path / SERVER_FILE
    server = read_document(server_path, ServerDoc) if server_path.exists() else None
    if server is not None and server.run_id != manifest.run_id:
        raise ReadError(
            f"{path}: server.json is of run {server.run_id}, manifest.json of {manifest.run_id}"
        )
    return TrialRun(path, manifest, sorted(records, key=lambda r: r.sequence), summary, server)


def read_requests(path: Path) -> list[RequestRecord]:
    """Every line of a ``requests.jsonl``, validated."""
    records: list[RequestRecord] = []
    for number, line in enumerate(jsonl_lines(path), start=1):
        try:
            records.append(RequestRecord.model_validate_json(line))
        except ValidationError as exc:
            raise ReadError(
                f"{path}:{number}: not a request record: {exc.errors()[0]['msg']}"
            ) from exc
    return records


def jsonl_lines(path: Path) -> list[bytes]:
    """The non-blank lines of a JSON-lines file (ReadError when it cannot be read)."""
    try:
        data = read_regular(path)
    except OSError as exc:
        raise ReadError(f"cannot read {path}: {exc.strerror or exc}") from exc
    return [line for line in data.splitlines() if line.strip()]
