"""The checked-in JSON Schemas match the models (python -m narwhal_trial.schemas --write)."""

from __future__ import annotations

from pathlib import Path

from narwhal_trial import json_schemas, schema_bytes

SCHEMAS = Path(__file__).resolve().parents[2] / "packages" / "narwhal-trial" / "schemas"


def test_checked_in_schemas_are_current() -> None:
    """Every schema file exists with exactly the bytes the models generate now."""
    for name, data in schema_bytes().items():
        path = SCHEMAS / name
        assert path.is_file(), f"missing {path}"
        assert path.read_bytes() == data, (
            f"{path} is stale: run python -m narwhal_trial.schemas --write {SCHEMAS}"
        )
    assert sorted(p.name for p in SCHEMAS.glob("*.schema.json")) == sorted(schema_bytes())


def test_schemas_forbid_unknown_keys_and_name_their_format() -> None:
    """Each document schema closes its properties and pins format and format_version."""
    for name, schema in json_schemas().items():
        assert schema["additionalProperties"] is False, name
        assert schema["properties"]["format"]["const"].startswith("narwhal.trial."), name
        assert "format_version" in schema["properties"], name
    assert "pass" in json_schemas()["summary"]["properties"]
