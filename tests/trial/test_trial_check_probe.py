"""``check --probe``'s items, without an engine: each target's speed against its profile (in the
probe, not drifted) and whether the probe compared the store being checked."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from narwhal_store import DriftFactor, EngineDrift, LoadedStore, ProbeDocument, read_store
from narwhal_trial.checks._check import probe_items

from ._store_kit import write_profiles


@pytest.fixture
def store(tmp_path: Path) -> LoadedStore:
    """A store of two engines, e0 and e1."""
    engines = [
        {"iid": iid, "url": f"http://127.0.0.1:{9100 + k}", "role": "mixed"}
        for k, iid in enumerate(("e0", "e1"))
    ]
    fleet = tmp_path / "fleet.json"
    fleet.write_bytes(
        orjson.dumps(
            {
                "format": "narwhal.fleet",
                "format_version": 1,
                "profiles": {"path": "profiles/fleet-profiles.json"},
                "engines": engines,
            }
        )
    )
    return read_store(write_profiles(fleet, [256, 1024, 4096], [512, 2048]))


def _phase(factor: float, low: float, high: float, threshold: float = 0.1) -> DriftFactor:
    return DriftFactor(
        factor=factor, low=low, high=high, repeats=9, drifted=abs(factor - 1) > threshold
    )


def _probe(store: LoadedStore, engines: dict[str, tuple[float, float]]) -> ProbeDocument:
    """A probe of ``engines`` (iid: prefill and decode factors) against ``store``."""
    return ProbeDocument.model_validate(
        {
            "format": "narwhal.probe",
            "format_version": 1,
            "generator": {"name": "narwhal-profile", "version": "0"},
            "created_at": "2026-01-02T03:04:05+00:00",
            "fleet": "fleet.json",
            "fleet_sha256": store.store.fleet_sha256,
            "profiles": str(store.path),
            "profiles_sha256": store.sha256,
            "threshold": 0.1,
            "engines": {
                iid: EngineDrift(
                    profile_created_at=store.store.created_at,
                    points=[
                        {
                            "phase": "prefill",
                            "input_len": 256,
                            "concurrency": 1,
                            "measured_s": [0.01 * prefill],
                            "reference_s": 0.01,
                            "reference": "samples",
                            "factors": [prefill],
                        }
                    ],
                    prefill=_phase(prefill, prefill - 0.02, prefill + 0.02),
                    decode=_phase(decode, decode - 0.03, decode + 0.03),
                    seconds=4.9,
                ).model_dump()
                for iid, (prefill, decode) in engines.items()
            },
        }
    )


def test_every_item_passes_for_a_fresh_probe_of_this_store(store: LoadedStore) -> None:
    """Both engines within the threshold, the probe of this very store: every item passes and
    names the figures."""
    probe = _probe(store, {"e0": (1.02, 0.97), "e1": (1.0, 1.05)})
    items = probe_items(probe, Path("probe.json"), store, ["e0", "e1"])
    assert [(i.subject, i.what, i.ok) for i in items] == [
        ("e0", "engine speed (probe)", True),
        ("e1", "engine speed (probe)", True),
        ("probe.json", "probe of this store", True),
    ]
    assert items[0].detail == (
        "prefill 1.02x the profile (5-95 % 1.00-1.04); decode 0.97x the profile "
        "(5-95 % 0.94-1.00), within the 10 % threshold (probe of 2026-01-02T03:04:05+00:00)"
    )


def test_a_drifted_engine_and_an_engine_not_probed_fail(store: LoadedStore) -> None:
    """e0's decode drifted: its item fails naming the phase and the factor; e1 is not in the
    probe: its item fails naming the probe."""
    probe = _probe(store, {"e0": (1.03, 1.21)})
    items = probe_items(probe, Path("probe.json"), store, ["e0", "e1"])
    assert [(i.subject, i.ok) for i in items] == [
        ("e0", False),
        ("e1", False),
        ("probe.json", True),
    ]
    assert items[0].detail.startswith(
        "decode 1.21x the profile (5-95 % 1.18-1.24), past the 10 % threshold (probe of "
    )
    assert "prefill" not in items[0].detail
    assert items[1].detail == "not in the probe probe.json (it probed e0): probe it"


def test_a_probe_of_another_store_fails(store: LoadedStore) -> None:
    """The probe's store SHA-256 is not this store's: the store item fails naming both."""
    probe = _probe(store, {"e0": (1.0, 1.0), "e1": (1.0, 1.0)}).model_copy(
        update={"profiles_sha256": "f" * 64}
    )
    items = probe_items(probe, Path("probe.json"), store, ["e0", "e1"])
    assert [i.ok for i in items] == [True, True, False]
    assert items[-1].detail == (
        f"the probe probe.json compared {store.path} (SHA-256 ffffffffffff), not {store.path} "
        f"(SHA-256 {store.sha256[:12]}): probe this store"
    )
