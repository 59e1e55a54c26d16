"""The virtual fleet's fused decode steps (``_vtime``): every outcome equals, float for float,
the one a step at a time gives, on fleets where fusing applies and where it must not."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from narwhal_trial.predictor import _vtime
from narwhal_trial.predictor._predict import load_model
from narwhal_trial.predictor._vtime import EngineModel, TrialShape, simulate

from .test_trial_predict_spread import _request, _spread_store

FITS = {"a": 0.03, "b": 2e-5, "c": 1e-10, "d0": 0.004, "d1": 3e-4, "d2": 2e-7}


def _engine(iid: str, device: str, role: str = "mixed", **kw: Any) -> EngineModel:
    return EngineModel(iid, role, device, **FITS, **kw)


FLEETS = {
    "one engine": [_engine("e0", "g0", budget=2048)],
    "one engine, 4 seqs": [_engine("e0", "g0", budget=2048, max_num_seqs=4)],
    "whole prompts": [_engine("e0", "g0", budget=512, chunked=False)],
    "mixing fit": [_engine("e0", "g0", budget=1024, share=0.6, step_s=0.002)],
    "two devices": [_engine("e0", "g0", max_num_seqs=8), _engine("e1", "g1", max_num_seqs=8)],
    "one shared device": [_engine("e0", "g0"), _engine("e1", "g0")],
    "split": [_engine("p0", "g0", role="prefill"), _engine("d0", "g1", role="decode")],
}


@pytest.mark.parametrize("fleet", FLEETS, ids=list(FLEETS))
@pytest.mark.parametrize("rate", [0.5, 4.0, 40.0])
def test_fused_steps_give_the_outcome_of_one_step_at_a_time(fleet: str, rate: float) -> None:
    """From an idle fleet to an overloaded one, 120-token outputs, with and without the client's
    in-flight cap."""
    for cap in (None, 16):
        shape = TrialShape(700, 120, 60, kv_transfer_s_per_token=1e-6, max_in_flight=cap)
        fused = simulate(FLEETS[fleet], shape, rate)
        stepped = simulate(FLEETS[fleet], shape, rate, fuse=False)
        assert fused == stepped


def test_a_scheduled_workload_with_its_own_lengths() -> None:
    """Requests of their own lengths at their own offsets (bursts and gaps)."""
    rng = random.Random(7)
    offsets = sorted(rng.uniform(0, 20) for _ in range(50))
    shape = TrialShape(
        0, 0, 50, offsets_s=tuple(offsets),
        inputs=tuple(rng.randint(50, 3000) for _ in range(50)),
        outputs=tuple(rng.randint(1, 300) for _ in range(50)),
    )  # fmt: skip
    for fleet in ("one engine, 4 seqs", "two devices"):
        for speedup in (0.5, 2.0, 8.0):
            fused = simulate(FLEETS[fleet], shape, speedup)
            assert fused == simulate(FLEETS[fleet], shape, speedup, fuse=False)


def test_monte_carlo_replications_with_levels_and_noise(tmp_path: Path) -> None:
    """The spread store's replications: each step's decode level looked up as its context grows,
    each request's drawn noise."""
    fleet, store = _spread_store(tmp_path)
    model, _ = load_model(_request(fleet, store, rate=1.0, replications=6))
    shape = TrialShape(8192, 128, 60)
    for rate in (0.3, 1.0, 3.0):
        for replica in model.replicas(0, 6):
            fused = simulate(model.engines, shape, rate, replica)
            assert fused == simulate(model.engines, shape, rate, replica, fuse=False)


@pytest.mark.parametrize("fleet", ["one engine", "split"])
def test_fusing_leaves_out_most_events(fleet: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """An engine decoding 120 tokens between sparse arrivals (a split fleet's decode engine, its
    requests handed over by the prefill engine): a handful of plans per request fused, at least
    one per token stepped."""
    plans: list[int] = []
    real = _vtime._plan

    def counted(dev: Any, now: float) -> None:
        plans.append(1)
        real(dev, now)

    monkeypatch.setattr(_vtime, "_plan", counted)
    shape = TrialShape(700, 120, 30)
    simulate(FLEETS[fleet], shape, 0.5)
    fused = len(plans)
    plans.clear()
    simulate(FLEETS[fleet], shape, 0.5, fuse=False)
    assert fused <= 15 * 30 < 120 * 30 <= len(plans), (fused, len(plans))
