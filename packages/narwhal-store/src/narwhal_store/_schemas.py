"""JSON Schemas generated from pydantic models: the helper every narwhal package uses for its
checked-in schema files, and the store's own four formats."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
from pydantic import BaseModel

from narwhal_store._atomic import Folder
from narwhal_store._fleet import FleetConfig
from narwhal_store._limits import LimitsFile
from narwhal_store._probe import ProbeDocument
from narwhal_store._profiles import ProfileStore
from narwhal_store._samples import SamplesSidecar

if TYPE_CHECKING:
    from pydantic.json_schema import JsonSchemaMode

__all__ = [
    "SCHEMA_FILES",
    "SchemaSet",
    "json_schemas",
    "schema_bytes",
    "schemas_command",
    "write_schemas",
]

_DIALECT = "https://json-schema.org/draft/2020-12/schema"
_OPTION = orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS | orjson.OPT_APPEND_NEWLINE


@dataclass(frozen=True, slots=True)
class SchemaSet:
    """Named pydantic models whose JSON Schemas (draft 2020-12) are checked in, one file each.

    ``file_name`` makes a name's file name (``{name}`` is replaced); ``mode`` is pydantic's schema
    mode, ``"validation"`` (what a reader accepts) or ``"serialization"`` (what a writer emits).
    """

    models: Mapping[str, type[BaseModel]]
    file_name: str = "{name}.schema.json"
    mode: JsonSchemaMode = "validation"

    @property
    def file_names(self) -> dict[str, str]:
        """Name → the file name of its schema."""
        return {name: self.file_name.format(name=name) for name in self.models}

    def json_schemas(self) -> dict[str, dict[str, Any]]:
        """Name → the JSON Schema of that model."""
        return {
            name: {"$schema": _DIALECT, **model.model_json_schema(mode=self.mode)}
            for name, model in self.models.items()
        }

    def schema_bytes(self) -> dict[str, bytes]:
        """File name → the exact bytes :meth:`write_schemas` writes (indented, keys sorted)."""
        files = self.file_names
        return {files[n]: orjson.dumps(s, option=_OPTION) for n, s in self.json_schemas().items()}

    def write_schemas(self, folder: str | Path) -> list[Path]:
        """Write every schema into ``folder`` (created if missing), each atomically and never
        through a symlink; returns the paths written."""
        target = Path(folder)
        written = []
        with Folder(target, create=True) as handle:
            for name, data in self.schema_bytes().items():
                handle.replace(handle.write_temp(name, data), name)
                written.append(target / name)
        return written

    def command(self, prog: str, argv: Sequence[str] | None = None) -> int:
        """``prog --write DIR``: (re)generate the checked-in schemas into DIR, naming each file
        written; returns the exit code (argparse exits 2 on a usage error)."""
        description = f"``{prog} --write DIR``: (re)generate the checked-in JSON Schemas."
        parser = argparse.ArgumentParser(prog=prog, description=description)
        parser.add_argument("--write", metavar="DIR", required=True, help="folder to write into")
        args = parser.parse_args(argv)
        for path in self.write_schemas(args.write):
            sys.stdout.write(f"wrote {path}\n")
        return 0


_STORE_SCHEMAS = SchemaSet(
    {
        "fleet": FleetConfig,
        "limits": LimitsFile,
        "store": ProfileStore,
        "sidecar": SamplesSidecar,
        "probe": ProbeDocument,
    }
)
#: File name of each schema in the checked-in ``schemas/`` folder.
SCHEMA_FILES = _STORE_SCHEMAS.file_names
#: ``{"fleet", "limits", "store", "sidecar", "probe"}`` → JSON Schema of that format.
json_schemas = _STORE_SCHEMAS.json_schemas
#: File name → the exact bytes :func:`write_schemas` writes.
schema_bytes = _STORE_SCHEMAS.schema_bytes
#: Write every schema into a folder (created if missing); returns the paths written.
write_schemas = _STORE_SCHEMAS.write_schemas
#: ``python -m narwhal_store.schemas --write DIR``.
schemas_command = _STORE_SCHEMAS.command
