"""JSON Schemas of the trial's file formats, generated from the pydantic models.

The checked-in copies live in ``packages/narwhal-trial/schemas/``; regenerate them with ``python -m
narwhal_trial.schemas --write packages/narwhal-trial/schemas``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel

from narwhal_trial._prediction import Prediction
from narwhal_trial._records import Manifest, RequestRecord, Summary
from narwhal_trial._workload import Workload

_DIALECT = "https://json-schema.org/draft/2020-12/schema"
_MODELS: dict[str, type[BaseModel]] = {
    "workload": Workload,
    "manifest": Manifest,
    "request": RequestRecord,
    "summary": Summary,
    "prediction": Prediction,
}
SCHEMA_FILES = {name: f"trial-{name}.schema.json" for name in _MODELS}
"""File name of each schema in the checked-in folder."""


def json_schemas() -> dict[str, dict[str, Any]]:
    """``workload``, ``manifest``, ``request`` (a requests.jsonl line), ``summary``,
    ``prediction`` → schema."""
    return {
        name: {"$schema": _DIALECT, **model.model_json_schema(mode="serialization")}
        for name, model in _MODELS.items()
    }


def schema_bytes() -> dict[str, bytes]:
    """File name → the exact bytes ``write_schemas`` writes."""
    option = orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS | orjson.OPT_APPEND_NEWLINE
    return {SCHEMA_FILES[n]: orjson.dumps(s, option=option) for n, s in json_schemas().items()}


def write_schemas(folder: Path) -> list[Path]:
    """Write every schema into ``folder`` (created if missing); returns the paths written."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, data in schema_bytes().items():
        (folder / name).write_bytes(data)
        written.append(folder / name)
    return written
