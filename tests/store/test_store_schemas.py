"""JSON Schemas: generated from the models, checked in, and never stale."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from narwhal_store import json_schemas, write_schemas
from narwhal_store._schemas import schema_bytes

SCHEMA_DIR = Path(__file__).resolve().parents[2] / "packages" / "narwhal-store" / "schemas"
TRIAL_SCHEMA_DIR = SCHEMA_DIR.parents[1] / "narwhal-trial" / "schemas"
REGENERATE = "python -m narwhal_store.schemas --write packages/narwhal-store/schemas"


def test_checked_in_schemas_are_current() -> None:
    """Every checked-in schema equals what the models generate now (else: regenerate them)."""
    expected = schema_bytes()
    present = sorted(p.name for p in SCHEMA_DIR.glob("*.schema.json"))
    assert present == sorted(expected), f"schema files differ; run `{REGENERATE}`"
    for name, data in expected.items():
        assert (SCHEMA_DIR / name).read_bytes() == data, f"{name} is stale; run `{REGENERATE}`"


def test_schemas_describe_every_format(tmp_path: Path) -> None:
    """The five schemas pin their format name and version and forbid unknown keys."""
    schemas = json_schemas()
    formats = {
        "fleet": "narwhal.fleet",
        "limits": "narwhal.limits",
        "store": "narwhal.profiles",
        "sidecar": "narwhal.samples",
        "probe": "narwhal.probe",
    }
    assert set(schemas) == set(formats)
    for name, fmt in formats.items():
        schema = schemas[name]
        assert schema["properties"]["format"]["const"] == fmt
        version = schema["properties"]["format_version"]
        # the store and its sidecar read 1 and 2 (2: mixing points); the others only 1
        assert version.get("enum", [version.get("const")]) == (
            [1, 2] if name in ("store", "sidecar") else [1]
        )
        assert schema["additionalProperties"] is False
        assert {"format", "format_version"} <= set(schema["required"])
    written = write_schemas(tmp_path / "out")
    assert sorted(p.name for p in written) == sorted(schema_bytes())
    assert (tmp_path / "out" / "fleet.schema.json").read_bytes() == schema_bytes()[
        "fleet.schema.json"
    ]


@pytest.mark.parametrize(
    ("module", "checked_in"),
    [("narwhal_store.schemas", SCHEMA_DIR), ("narwhal_trial.schemas", TRIAL_SCHEMA_DIR)],
)
def test_the_regenerate_command_writes_the_checked_in_files(
    module: str, checked_in: Path, tmp_path: Path
) -> None:
    """``python -m <package>.schemas --write DIR`` (both share ``SchemaSet.command``) writes
    exactly the checked-in files and names each; without ``--write`` it is a usage error (2)."""
    out = tmp_path / "schemas"
    done = subprocess.run(
        [sys.executable, "-m", module, "--write", str(out)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    written = sorted(p.name for p in out.iterdir())
    assert written == sorted(p.name for p in checked_in.glob("*.schema.json"))
    for name in written:
        assert (out / name).read_bytes() == (checked_in / name).read_bytes()
    assert sorted(done.stdout.splitlines()) == [f"wrote {out / name}" for name in written]
    bare = subprocess.run(
        [sys.executable, "-m", module], capture_output=True, text=True, check=False, timeout=120
    )
    assert bare.returncode == 2
    assert "--write" in bare.stderr
