"""The freshness probe's document (``narwhal.probe``): a valid one loads; a bad one is refused
naming the file and the JSON path of the bad value."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import orjson
import pytest

from narwhal_store import FormatError, ProbeDocument, load_probe

SHA = "ab" * 32


def _probe() -> dict[str, Any]:
    """One engine probed at one prefill and one decode point; its decode drifted."""
    return {
        "format": "narwhal.probe",
        "format_version": 1,
        "generator": {"name": "narwhal-profile", "version": "0.0.0"},
        "created_at": "2026-01-02T03:04:05+00:00",
        "fleet": "fleet.json",
        "fleet_sha256": SHA,
        "profiles": "profiles/fleet-profiles.json",
        "profiles_sha256": SHA,
        "threshold": 0.1,
        "engines": {
            "e0": {
                "profile_created_at": "2026-01-01T00:00:00+00:00",
                "points": [
                    {
                        "phase": "prefill",
                        "input_len": 2048,
                        "concurrency": 1,
                        "measured_s": [0.050, 0.052],
                        "reference_s": 0.050,
                        "reference": "samples",
                        "factors": [1.0, 1.04],
                    },
                    {
                        "phase": "decode",
                        "input_len": 512,
                        "concurrency": 4,
                        "measured_s": [0.012],
                        "reference_s": 0.010,
                        "reference": "fit",
                        "factors": [1.2],
                    },
                ],
                "prefill": {
                    "factor": 1.02,
                    "low": 1.0,
                    "high": 1.04,
                    "repeats": 2,
                    "drifted": False,
                },
                "decode": {"factor": 1.2, "low": 1.2, "high": 1.2, "repeats": 1, "drifted": True},
                "seconds": 4.9,
            }
        },
    }


def _write(tmp_path: Path, doc: dict[str, Any]) -> Path:
    path = tmp_path / "probe.json"
    path.write_bytes(orjson.dumps(doc))
    return path


def test_a_valid_probe_loads(tmp_path: Path) -> None:
    """The document reads back; the drifted engine is named, by document order."""
    doc = load_probe(_write(tmp_path, _probe()))
    assert isinstance(doc, ProbeDocument)
    assert doc.drifted() == ["e0"]
    engine = doc.engines["e0"]
    assert engine.drifted
    assert engine.decode is not None and engine.decode.factor == 1.2
    assert [p.reference for p in engine.points] == ["samples", "fit"]


def _bad(change: str) -> dict[str, Any]:
    doc = copy.deepcopy(_probe())
    engine = doc["engines"]["e0"]
    if change == "factors":
        engine["points"][0]["factors"] = [1.0]
    elif change == "interval":
        engine["prefill"]["low"] = 1.03
    elif change == "unknown key":
        engine["points"][1]["note"] = "extra"
    elif change == "threshold":
        doc["threshold"] = 1.5
    return doc


@pytest.mark.parametrize(
    ("change", "where", "why"),
    [
        ("factors", "engines.e0.points[0].factors", "1 factor(s) for 2 repeat(s)"),
        ("interval", "engines.e0.prefill.factor", "1.02 is not within its interval [1.03, 1.04]"),
        ("unknown key", "engines.e0.points[1].note", "unknown key"),
        ("threshold", "threshold", "1.5"),
    ],
)
def test_a_bad_probe_is_refused_naming_the_json_path(
    tmp_path: Path, change: str, where: str, why: str
) -> None:
    """Factors not one per repeat, a factor outside its interval, an unknown key, a threshold
    out of (0, 1): FormatError naming the file and the JSON path."""
    path = _write(tmp_path, _bad(change))
    with pytest.raises(FormatError) as caught:
        load_probe(path)
    message = str(caught.value)
    assert str(path) in message, message
    assert where in message, message
    assert why in message, message
