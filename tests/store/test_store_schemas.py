"""JSON Schemas: generated from the models, checked in, and never stale."""

from __future__ import annotations

from pathlib import Path

from narwhal_store import json_schemas, write_schemas
from narwhal_store._schemas import schema_bytes

SCHEMA_DIR = Path(__file__).resolve().parents[2] / "packages" / "narwhal-store" / "schemas"
REGENERATE = "python -m narwhal_store.schemas --write packages/narwhal-store/schemas"


def test_checked_in_schemas_are_current() -> None:
    """Every checked-in schema equals what the models generate now (else: regenerate them)."""
    expected = schema_bytes()
    present = sorted(p.name for p in SCHEMA_DIR.glob("*.schema.json"))
    assert present == sorted(expected), f"schema files differ; run `{REGENERATE}`"
    for name, data in expected.items():
        assert (SCHEMA_DIR / name).read_bytes() == data, f"{name} is stale; run `{REGENERATE}`"


def test_schemas_describe_every_format(tmp_path: Path) -> None:
    """The four schemas pin their format name and version and forbid unknown keys."""
    schemas = json_schemas()
    formats = {
        "fleet": "narwhal.fleet",
        "limits": "narwhal.limits",
        "store": "narwhal.profiles",
        "sidecar": "narwhal.samples",
    }
    assert set(schemas) == set(formats)
    for name, fmt in formats.items():
        schema = schemas[name]
        assert schema["properties"]["format"]["const"] == fmt
        assert schema["properties"]["format_version"]["const"] == 1
        assert schema["additionalProperties"] is False
        assert {"format", "format_version"} <= set(schema["required"])
    written = write_schemas(tmp_path / "out")
    assert sorted(p.name for p in written) == sorted(schema_bytes())
    assert (tmp_path / "out" / "fleet.schema.json").read_bytes() == schema_bytes()[
        "fleet.schema.json"
    ]
