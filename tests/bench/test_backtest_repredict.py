"""The backtest's ``--repredict``: every prediction of a finished work folder made again, in place,
from its own profiles, probes, SLOs and rates (bench/_backtest.py ``repredict``)."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest

from ..trial._probe_kit import write_probe
from ..trial._store_kit import one_engine_store

REPO = Path(__file__).resolve().parents[2]
FITS = ({"a": 0.02, "b": 4e-5, "c": 0.0}, {"d0": 0.004, "d1": 5e-4, "d2": 0.0})


@pytest.fixture
def backtest(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(REPO))
    # the repo root is on sys.path only inside this fixture
    import bench._backtest as module

    return module


def test_every_prediction_is_made_again_from_the_folders_own_inputs(
    backtest: ModuleType, tmp_path: Path
) -> None:
    """A shape folder whose predictions are stale: afterwards each named document is the
    predictor's own at the plan's SLO and rate, the probe's with the probe's factors, the
    profile's without a probe; the plan, probe and store are untouched."""
    variant = tmp_path / "work" / "sim"
    variant.mkdir(parents=True)
    fleet, store = one_engine_store(variant, FITS)
    shape = variant / "512x32"
    shape.mkdir()
    probe = write_probe(shape / "probe.json", fleet, store, {"e": ([1.2] * 3, [0.9] * 3)})
    rates = [
        {"factor": f, "rate": r, "trial": f"trial-{k}-rate-{r:g}",
         "predictions": {"probe": f"rate-{k}-probe.json", "profile": f"rate-{k}-profile.json"}}
        for k, (f, r) in enumerate(((1.5, 6.0),))
    ]  # fmt: skip
    plan = {
        "variant": "sim", "shape": {"input_tokens": 512, "output_tokens": 32},
        "ttft_s": "1", "tpot_s": "0.05",
        "searches": {"probe": "search-probe.json", "profile": "search-profile.json"},
        "rates": rates,
    }  # fmt: skip
    (shape / "plan.json").write_text(json.dumps(plan), encoding="utf-8")
    names = ["search-probe.json", "search-profile.json"] + [
        name for entry in rates for name in entry["predictions"].values()
    ]
    for name in names:
        (shape / name).write_text('{"stale": true}', encoding="utf-8")
    kept = {p: p.read_bytes() for p in (shape / "plan.json", probe, store)}
    said: list[str] = []

    backtest.repredict(tmp_path / "work", said.append)

    assert said == ["sim 512x32: predicted again"]
    assert all(p.read_bytes() == b for p, b in kept.items())
    docs = {name: json.loads((shape / name).read_text(encoding="utf-8")) for name in names}
    for name, doc in docs.items():
        assert doc["format"] == "narwhal.trial.prediction" and doc["format_version"] == 5, name
        assert doc["inputs"]["ttft_s"] == "1" and doc["inputs"]["tpot_s"] == "0.05", name
        assert ("probe" in doc) == ("probe" in name), name
    assert docs["search-probe.json"]["search"]["band"]["pass_50"] > 0
    assert docs["rate-0-profile.json"]["prediction"]["rate"] == 6.0
    sides = docs["rate-0-probe.json"]["probe"]
    assert sides["prefill"]["e"]["factor"] == pytest.approx(1.2)
    assert sides["decode"]["e"]["factor"] == pytest.approx(0.9)
    assert (shape / "repredict.log").read_text(encoding="utf-8").count("predict") >= len(names)
