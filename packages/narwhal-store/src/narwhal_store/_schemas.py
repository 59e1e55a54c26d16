"""JSON Schemas of the four file formats, generated from the models."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel

from ._fleet import FleetConfig
from ._limits import LimitsFile
from ._profiles import ProfileStore
from ._samples import SamplesSidecar

__all__ = ["SCHEMA_FILES", "json_schemas", "schema_bytes", "write_schemas"]

_DIALECT = "https://json-schema.org/draft/2020-12/schema"
_MODELS: dict[str, type[BaseModel]] = {
    "fleet": FleetConfig,
    "limits": LimitsFile,
    "store": ProfileStore,
    "sidecar": SamplesSidecar,
}
#: File name of each schema in the checked-in ``schemas/`` folder.
SCHEMA_FILES = {name: f"{name}.schema.json" for name in _MODELS}


def json_schemas() -> dict[str, dict[str, Any]]:
    """``{"fleet", "limits", "store", "sidecar"}`` → JSON Schema (draft 2020-12) of that format."""
    out: dict[str, dict[str, Any]] = {}
    for name, model in _MODELS.items():
        schema = model.model_json_schema(mode="validation")
        out[name] = {"$schema": _DIALECT, **schema}
    return out


def schema_bytes() -> dict[str, bytes]:
    """File name → the exact bytes :func:`write_schemas` writes."""
    option = orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS | orjson.OPT_APPEND_NEWLINE
    schemas = json_schemas()
    return {SCHEMA_FILES[name]: orjson.dumps(s, option=option) for name, s in schemas.items()}


def write_schemas(folder: str | Path) -> list[Path]:
    """Write every schema into ``folder`` (created if missing); returns the paths written."""
    from ._atomic import Folder

    target = Path(folder)
    written = []
    with Folder(target, create=True) as handle:
        for name, data in schema_bytes().items():
            handle.replace(handle.write_temp(name, data), name)
            written.append(target / name)
    return written
