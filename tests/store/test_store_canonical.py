"""Canonical JSON and SHA-256: the documented definition, and agreement with the engine client."""

from __future__ import annotations

import hashlib
import importlib
import json
from pathlib import Path
from typing import Any

import pytest

from narwhal_store import canonical_json, sha256_file, sha256_hex

DOC: dict[str, Any] = {
    "z": [1, 2.5, -0.0, 1e-12, 123456789012345678, 0.1 + 0.2],
    "a": {"ünïcode": "snow ☃ and emoji 🐋", "nested": {"k": [None, True, False, {"b": 1, "a": 2}]}},
    "m": 'quote " backslash \\ newline \n tab \t',
    "floats": [3.141592653589793, 1.7976931348623157e308, 5e-324, 2.0],
}


def _reference(obj: Any) -> bytes:
    return json.dumps(
        obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False
    ).encode("ascii")


def test_canonical_json_matches_the_documented_definition() -> None:
    """canonical_json gives exactly the stdlib definition from docs/interfaces.md."""
    out = canonical_json(DOC)
    assert out == _reference(DOC)
    assert out.startswith(b'{"a":{"nested":')
    assert b", " not in out
    assert b": " not in out
    assert b"\\u2603" in out
    assert out.isascii()
    assert json.loads(out) == DOC


def test_canonical_json_refuses_non_finite_numbers() -> None:
    """NaN and infinities are refused, never written."""
    with pytest.raises(ValueError, match="Out of range float"):
        canonical_json({"x": float("nan")})
    with pytest.raises(ValueError, match="Out of range float"):
        canonical_json([float("inf")])


def test_sha256_helpers(tmp_path: Path) -> None:
    """sha256_hex and sha256_file give lowercase hex digests of the bytes."""
    data = canonical_json(DOC)
    assert sha256_hex(data) == hashlib.sha256(data).hexdigest()
    assert sha256_hex(b"") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    path = tmp_path / "blob.bin"
    path.write_bytes(data * 5000)
    assert sha256_file(path) == hashlib.sha256(data * 5000).hexdigest()


def test_engine_client_canonical_json_is_byte_identical() -> None:
    """narwhal_engine_client.canonical_json gives the same bytes and digest as narwhal_store's."""
    client = importlib.import_module("narwhal_engine_client")
    other = client.canonical_json
    assert other(DOC) == canonical_json(DOC)
    assert client.sha256_hex(other(DOC)) == sha256_hex(canonical_json(DOC))
    evidence = {"url": "http://h:1", "model": "m☃", "max_model_len": 16384, "start": 1.5}
    assert client.evidence_sha256(evidence) == sha256_hex(canonical_json(evidence))
