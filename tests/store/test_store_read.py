"""Reading stores with verification: missing or tampered sidecars and samples are refused."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from narwhal_store import (
    FormatError,
    IntegrityError,
    read_sidecar,
    read_store,
    sha256_file,
    sidecar_path,
    write_store,
)

PairFactory = Callable[..., Any]
_OPTS = orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS


@pytest.fixture
def written(tmp_path: Path, make_pair: PairFactory) -> Path:
    """A verified store of the whole fleet at tmp_path/out/p.json."""
    path = tmp_path / "out" / "p.json"
    write_store(path, *make_pair(), mode="fresh")
    return path


def _rewrite_sidecar(written: Path, doc: dict[str, Any]) -> None:
    """Write ``doc`` as the sidecar and record its new SHA-256 in the store."""
    side = sidecar_path(written)
    side.write_bytes(orjson.dumps(doc, option=_OPTS))
    store = orjson.loads(written.read_bytes())
    store["samples"]["sha256"] = sha256_file(side)
    written.write_bytes(orjson.dumps(store, option=_OPTS))


def test_missing_sidecar_is_refused(written: Path) -> None:
    """A store without its sidecar is refused naming the sidecar, with or without verification."""
    sidecar_path(written).unlink()
    with pytest.raises(IntegrityError, match=r"sidecar .*p\.samples\.json missing"):
        read_store(written)
    with pytest.raises(IntegrityError, match="missing"):
        read_store(written, verify=False)


def test_tampered_sidecar_names_both_hashes(written: Path) -> None:
    """Any change to the sidecar's bytes is refused, naming the actual and recorded SHA-256."""
    side = sidecar_path(written)
    recorded = sha256_file(side)
    side.write_bytes(side.read_bytes().replace(b"  ", b"   ", 1))
    actual = sha256_file(side)
    with pytest.raises(IntegrityError) as caught:
        read_store(written)
    assert actual in str(caught.value) and recorded in str(caught.value)
    assert "samples of profile" not in str(caught.value)
    assert read_store(written, verify=False).sidecar_sha256 == actual


def test_tampered_sidecar_also_names_the_profile_at_fault(written: Path) -> None:
    """An edited timing (sidecar not re-hashed) is refused naming both file hashes and the profile
    whose samples changed."""
    side = sidecar_path(written)
    recorded = sha256_file(side)
    doc = orjson.loads(side.read_bytes())
    doc["profiles"][1]["prefill_samples"][0]["ttft_s"][0] = 0.5
    side.write_bytes(orjson.dumps(doc, option=_OPTS))
    with pytest.raises(IntegrityError) as caught:
        read_store(written)
    message = str(caught.value)
    assert f"has SHA-256 {sha256_file(side)} but the store records {recorded}" in message
    assert re.search(r"samples of profile h200-0\.decode .* do not match", message)


def test_tampered_samples_of_one_profile_name_the_profile(written: Path) -> None:
    """A re-hashed sidecar whose one profile's samples changed is refused naming that profile."""
    doc = orjson.loads(sidecar_path(written).read_bytes())
    doc["profiles"][1]["prefill_samples"][0]["ttft_s"][0] = 0.5
    _rewrite_sidecar(written, doc)
    with pytest.raises(IntegrityError, match=r"samples of profile h200-0\.decode .* do not match"):
        read_store(written)
    assert read_store(written, verify=False).store.profiles[1].key.engine == "h200-0.decode"


def test_profile_without_samples_entry_is_refused(written: Path) -> None:
    """A store profile with no sidecar entry is refused naming the profile."""
    doc = orjson.loads(sidecar_path(written).read_bytes())
    del doc["profiles"][2]
    _rewrite_sidecar(written, doc)
    with pytest.raises(IntegrityError, match=r"profile solo .* has no samples"):
        read_store(written)


def test_sidecar_entry_without_profile_is_refused(written: Path) -> None:
    """A sidecar entry that no store profile claims is refused."""
    store = orjson.loads(written.read_bytes())
    del store["profiles"][0]
    written.write_bytes(orjson.dumps(store, option=_OPTS))
    with pytest.raises(IntegrityError, match=r"samples of h200-0\.prefill .* have no profile"):
        read_store(written)


def test_invalid_store_and_sidecar_documents_name_file_and_path(written: Path) -> None:
    """Format problems in the store or the sidecar name the file and the JSON path."""
    side = sidecar_path(written)
    doc = orjson.loads(side.read_bytes())
    doc["profiles"][0]["decode_samples"][0]["streams"][0]["chunk_tokens"] = [1]
    side.write_bytes(orjson.dumps(doc))
    with pytest.raises(FormatError) as caught:
        read_sidecar(side)
    assert caught.value.path == str(side)
    assert caught.value.json_path == "profiles[0].decode_samples[0].streams[0].chunk_tokens"
    store = orjson.loads(written.read_bytes())
    store["profiles"][0]["prefill_fit"]["coefficients"]["b"] = -1.0
    written.write_bytes(orjson.dumps(store))
    with pytest.raises(FormatError) as caught:
        read_store(written)
    assert caught.value.json_path == "profiles[0].prefill_fit.coefficients.b"


def test_loaded_store_lookups(written: Path) -> None:
    """LoadedStore finds an engine's single profile and its samples."""
    loaded = read_store(written)
    profile = loaded.profile("solo")
    assert profile.key.role_split == {"mixed": 1}
    assert loaded.samples(profile.key).settings.prefill_repeats == 3
    with pytest.raises(KeyError):
        loaded.profile("ghost")
