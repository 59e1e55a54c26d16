"""Fleet and limits files: valid documents, every bad value reported with its JSON path."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from narwhal_store import (
    FormatError,
    LoadedFleet,
    StoreError,
    load_fleet,
    load_limits,
    profile_key,
    role_split,
    sha256_file,
)


def _write(path: Path, doc: Any) -> Path:
    path.write_bytes(orjson.dumps(doc))
    return path


def test_valid_fleet_loads_with_provenance(fleet_file: Path, fleet: LoadedFleet) -> None:
    """A valid fleet loads; sha256 is the file's digest and profiles.path resolves beside it."""
    assert fleet.sha256 == sha256_file(fleet_file)
    assert fleet.base_dir == fleet_file.parent
    assert fleet.profiles_path == fleet_file.parent / "profiles" / "fleet-profiles.json"
    assert fleet.config.iids() == ["h200-0.prefill", "h200-0.decode", "solo"]
    contract = fleet.config.engines[0].engine_contract
    assert contract is not None
    assert contract.expected() == {
        "model": "llama-3.1-8b",
        "max_model_len": 16384,
        "version": "0.11.0",
        "prefix_caching": False,
    }


def test_absolute_profiles_path_is_kept(tmp_path: Path, fleet_doc: dict[str, Any]) -> None:
    """An absolute profiles.path is used as written."""
    fleet_doc["profiles"]["path"] = str(tmp_path / "elsewhere" / "p.json")
    loaded = load_fleet(_write(tmp_path / "f.json", fleet_doc))
    assert loaded.profiles_path == tmp_path / "elsewhere" / "p.json"


def _set(path: tuple[Any, ...], value: Any) -> Callable[[dict[str, Any]], None]:
    def apply(doc: dict[str, Any]) -> None:
        target: Any = doc
        for part in path[:-1]:
            target = target[part]
        target[path[-1]] = value

    return apply


def _delete(path: tuple[Any, ...]) -> Callable[[dict[str, Any]], None]:
    def apply(doc: dict[str, Any]) -> None:
        target: Any = doc
        for part in path[:-1]:
            target = target[part]
        del target[path[-1]]

    return apply


BAD_FLEETS = [
    (_set(("engines", 1, "role"), "prefil"), "engines[1].role", "'prefill', 'decode' or 'mixed'"),
    (_set(("engines", 0, "iid"), "-bad"), "engines[0].iid", "should match pattern"),
    (_set(("engines", 2, "iid"), "h200-0.prefill"), "engines[2].iid", "duplicate iid"),
    (_set(("engines", 0, "url"), "ftp://x"), "engines[0].url", "http:// or https://"),
    (_set(("engines", 0, "url"), "http://u:p@h:1"), "engines[0].url", "credentials"),
    (_set(("engines", 0, "url"), 8101), "engines[0].url", "valid string"),
    (_set(("engines", 0, "colour"), "red"), "engines[0].colour", "unknown key"),
    (
        _set(("engines", 0, "engine_contract", "gpu"), "h200"),
        "engines[0].engine_contract.gpu",
        "unknown key",
    ),
    (
        _set(("engines", 0, "engine_contract", "max_model_len"), "16384"),
        "engines[0].engine_contract.max_model_len",
        "valid integer",
    ),
    (
        _set(("engines", 0, "engine_contract", "prefix_caching"), "no"),
        "engines[0].engine_contract.prefix_caching",
        "valid boolean",
    ),
    (
        _set(("engines", 0, "shared_device"), {"group": ""}),
        "engines[0].shared_device.group",
        "at least 1",
    ),
    (_set(("engines", 0, "api_key_env"), "MY-KEY"), "engines[0].api_key_env", "pattern"),
    (_delete(("engines", 2, "url")), "engines[2].url", "Field required"),
    (_set(("engines",), []), "engines", "at least 1"),
    (_set(("profiles",), {"path": "p.json", "mode": 1}), "profiles.mode", "unknown key"),
    (_set(("format",), "narwhal.limits"), "format", "'narwhal.fleet'"),
    (_set(("format_version",), 2), "format_version", "Input should be 1"),
    (_set(("extra",), True), "extra", "unknown key"),
]


@pytest.mark.parametrize(("mutate", "json_path", "fragment"), BAD_FLEETS)
def test_bad_fleet_value_names_its_json_path(
    tmp_path: Path,
    fleet_doc: dict[str, Any],
    mutate: Callable[[dict[str, Any]], None],
    json_path: str,
    fragment: str,
) -> None:
    """Each bad value gives a FormatError naming the file and the value's JSON path."""
    mutate(fleet_doc)
    path = _write(tmp_path / "fleet.json", fleet_doc)
    with pytest.raises(FormatError) as caught:
        load_fleet(path)
    assert caught.value.json_path == json_path
    assert fragment in caught.value.message
    assert str(caught.value).startswith(f"{path}: {json_path}: ")


@pytest.mark.parametrize(
    ("url", "fragment"),
    [
        ("http://user:s3cret-pw@127.0.0.1:8101", "credentials in URLs"),
        ("ftp://user:s3cret-pw@127.0.0.1:8101", "credentials in URLs"),
        ("http://127.0.0.1:8101/?key=s3cret-pw", "query or fragment"),
    ],
)
def test_url_credentials_are_never_echoed(
    tmp_path: Path, fleet_doc: dict[str, Any], url: str, fragment: str
) -> None:
    """A URL holding a credential is refused without repeating the credential in the message."""
    fleet_doc["engines"][0]["url"] = url
    path = _write(tmp_path / "fleet.json", fleet_doc)
    with pytest.raises(FormatError) as caught:
        load_fleet(path)
    assert caught.value.json_path == "engines[0].url"
    assert fragment in caught.value.message
    assert "s3cret-pw" not in str(caught.value)


def test_bad_role_message_shows_the_value(tmp_path: Path, fleet_doc: dict[str, Any]) -> None:
    """The message reads like the documented example, with the offending value."""
    fleet_doc["engines"][1]["role"] = "prefil"
    path = _write(tmp_path / "fleet.json", fleet_doc)
    with pytest.raises(FormatError) as caught:
        load_fleet(path)
    assert str(caught.value) == (
        f"{path}: engines[1].role: Input should be 'prefill', 'decode' or 'mixed' (got 'prefil')"
    )


def test_every_error_is_listed_once(tmp_path: Path, fleet_doc: dict[str, Any]) -> None:
    """All errors of a fleet file are in the one message, in document order, each value once."""
    fleet_doc["format_version"] = 2
    fleet_doc["engines"][0]["url"] = "ftp://x:1"
    fleet_doc["engines"][1]["role"] = "boss"
    fleet_doc["engines"][2]["extra"] = 1
    path = _write(tmp_path / "fleet.json", fleet_doc)
    with pytest.raises(FormatError) as caught:
        load_fleet(path)
    assert caught.value.json_path == "format_version"
    assert str(caught.value) == (
        f"{path}: format_version: Input should be 1 (got 2); "
        "engines[0].url: URL must start with http:// or https:// (got 'ftp://x:1'); "
        "engines[1].role: Input should be 'prefill', 'decode' or 'mixed' (got 'boss'); "
        "engines[2].extra: unknown key (not allowed here)"
    )


def test_invalid_json_and_missing_file_name_the_file(tmp_path: Path) -> None:
    """Unreadable or non-JSON files are FormatErrors (also ValueErrors) naming the file."""
    broken = tmp_path / "broken.json"
    broken.write_text('{"format": ')
    with pytest.raises(FormatError, match=r"broken\.json: not valid JSON"):
        load_fleet(broken)
    with pytest.raises(ValueError, match=r"absent\.json: cannot read"):
        load_fleet(tmp_path / "absent.json")
    listing = _write(tmp_path / "list.json", [1, 2])
    with pytest.raises(FormatError, match=r"list\.json: .*valid dictionary"):
        load_fleet(listing)


def test_limits_valid_and_unknown_iid(tmp_path: Path, fleet: LoadedFleet) -> None:
    """Limits load for fleet engines; an iid not in the fleet is a FormatError at its path."""
    good = {
        "format": "narwhal.limits",
        "format_version": 1,
        "engines": {"solo": {"max_num_seqs": 32}},
    }
    limits = load_limits(_write(tmp_path / "limits.json", good), fleet)
    assert limits.engines["solo"].max_num_seqs == 32
    bad = {**good, "engines": {"solo": {"max_num_seqs": 8}, "ghost.1": {"max_num_seqs": 4}}}
    path = _write(tmp_path / "bad-limits.json", bad)
    with pytest.raises(FormatError) as caught:
        load_limits(path, fleet.config)
    assert caught.value.json_path == 'engines["ghost.1"]'
    assert "not in the fleet" in str(caught.value)


@pytest.mark.parametrize(
    ("engines", "json_path"),
    [
        ({"solo": {"max_num_seqs": 0}}, "engines.solo.max_num_seqs"),
        ({"solo": {"max_num_seqs": 2.0}}, "engines.solo.max_num_seqs"),
        ({"solo": {"max_num_seqs": 2, "x": 1}}, "engines.solo.x"),
        ({"solo": {}}, "engines.solo"),
        ({"solo": {"max_num_batched_tokens": 0}}, "engines.solo.max_num_batched_tokens"),
        ({"solo": {"enable_chunked_prefill": "yes"}}, "engines.solo.enable_chunked_prefill"),
        ({"-bad": {"max_num_seqs": 1}}, 'engines["-bad"]'),
    ],
)
def test_bad_limits_values(
    tmp_path: Path, fleet: LoadedFleet, engines: dict[str, Any], json_path: str
) -> None:
    """Bad limit values are reported at their JSON path."""
    doc = {"format": "narwhal.limits", "format_version": 1, "engines": engines}
    with pytest.raises(FormatError) as caught:
        load_limits(_write(tmp_path / "limits.json", doc), fleet)
    assert caught.value.json_path == json_path


def test_role_splits(fleet: LoadedFleet, tmp_path: Path, fleet_doc: dict[str, Any]) -> None:
    """A group's split counts each role among its engines; no group: the engine's role alone."""
    assert role_split(fleet, "h200-0.prefill") == {"decode": 1, "prefill": 1}
    assert role_split(fleet, "h200-0.decode") == {"decode": 1, "prefill": 1}
    assert role_split(fleet, "solo") == {"mixed": 1}
    fleet_doc["engines"].append(
        {
            "iid": "p2",
            "url": "http://127.0.0.1:8103",
            "role": "prefill",
            "shared_device": {"group": "h200-0"},
        }
    )
    fleet_doc["engines"].append(
        {
            "iid": "other",
            "url": "http://127.0.0.1:8104",
            "role": "decode",
            "shared_device": {"group": "b"},
        }
    )
    bigger = load_fleet(_write(tmp_path / "f2.json", fleet_doc))
    assert role_split(bigger, "p2") == {"decode": 1, "prefill": 2}
    assert role_split(bigger, "other") == {"decode": 1}
    with pytest.raises(StoreError, match="'ghost' is not in the fleet"):
        role_split(bigger, "ghost")


def test_profile_key_from_fleet(fleet: LoadedFleet) -> None:
    """profile_key combines iid, group, split and the engine's role."""
    key = profile_key(fleet, "h200-0.decode")
    assert key.model_dump() == {
        "engine": "h200-0.decode",
        "gpu_group": "h200-0",
        "role_split": {"decode": 1, "prefill": 1},
        "target_role": "decode",
    }
    solo = profile_key(fleet.config, "solo")
    assert solo.gpu_group is None
    assert solo.role_split == {"mixed": 1}
    assert solo.target_role == "mixed"
