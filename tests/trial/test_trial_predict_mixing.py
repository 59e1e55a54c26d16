"""The predictor's scheduler settings and prefill/decode mixing (docs/design.md §13): each engine's
budget, chunked prefill and running-sequence cap with their sources, and the mixing model."""

from __future__ import annotations

import dataclasses
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from narwhal_store import LimitsFile, read_store
from narwhal_trial.predictor._engine_settings import ASSUMED_MIXING, MIXING_MEAN_LIMIT, scheduling
from narwhal_trial.predictor._model import TrialTarget
from narwhal_trial.predictor._predict import PredictRequest, predict
from narwhal_trial.predictor._vtime import EngineModel, TrialShape, simulate

from ._store_kit import write_profiles

# one engine whose off-GPU wait is 0 (a = d0): a step costs d0 = 10 ms plus 10 µs per prompt token
_ENGINE = EngineModel("e", "mixed", "e", a=0.010, b=1e-5, c=0.0, d0=0.010, d1=0.0, d2=0.0)
# request 0 prefills alone (20 ms in one step, 50 ms in four chunks of 250) and decodes 11 tokens
# in 10 ms steps; request 1 arrives at 65 ms, so its 1,000-token prefill (10 ms of chunk cost)
# lands inside request 0's decode
_SHAPE = TrialShape(1000, 11, 2)
_RATE = 1 / 0.065


@pytest.mark.parametrize(
    ("changes", "tpot_ms"),
    [
        ({}, 11.0),  # vLLM's shared step: the chunk's 10 ms on one of ten intervals
        ({"share": 0.5}, 10.5),  # half of it lands on the decodes
        ({"step_s": 0.005}, 11.5),  # taking turns: one more step's fixed cost per mixed step
        ({"budget": 250}, 11.0),  # five chunks of 249 (one budget token is the decode's)...
        ({"budget": 250, "step_s": 0.005}, 13.5),  # ...each mixed step paying step_s
        ({"budget": 250, "chunked": False, "step_s": 0.005}, 11.5),  # whole prompt, one step
    ],
)
def test_mixed_steps_cost_what_the_mixing_says(changes: dict[str, Any], tpot_ms: float) -> None:
    """Request 0's TPOT on the virtual clock: ten intervals of 10 ms, plus what request 1's
    prefill adds to the steps it shares with request 0's decode."""
    engine = dataclasses.replace(_ENGINE, **changes)
    out = simulate([engine], _SHAPE, _RATE)
    assert out.tpot[0] * 1e3 == pytest.approx(tpot_ms, abs=1e-9)
    chunked_small = engine.chunked and engine.budget < _SHAPE.input_tokens
    assert out.ttft[0] * 1e3 == pytest.approx(50.0 if chunked_small else 20.0, abs=1e-9)


def _fleet(folder: Path) -> Path:
    doc = {
        "format": "narwhal.fleet",
        "format_version": 1,
        "profiles": {"path": "profiles/fleet-profiles.json"},
        "engines": [{"iid": "e", "url": "http://127.0.0.1:9100", "role": "mixed"}],
    }
    path = folder / "fleet.json"
    path.write_text(json.dumps(doc))
    return path


_SCHEDULER = {
    "max_num_batched_tokens": {"value": 256, "source": "engine"},
    "max_num_seqs": {"value": 8, "source": "limits"},
    "chunked_prefill": {"value": None, "source": "unknown"},
}
_MIXING = {
    "form": "mixing-share-step-v1",
    "coefficients": {"share": 0.9, "step_s": 0.002},
    "domain": {"prefill_lens": [128, 1024]},
    "residuals": [{"x": [128], "observed": 0.01, "predicted": 0.01, "rel_error": 0.0}] * 4,
    "mean_rel_error": 0.03,
    "worst_rel_error": 0.05,
}


def _limits(engine: dict[str, Any]) -> LimitsFile:
    return LimitsFile.model_validate(
        {"format": "narwhal.limits", "format_version": 1, "engines": {"e": engine}}
    )


def test_settings_come_from_the_operator_then_the_profile_then_the_default(
    tmp_path: Path,
) -> None:
    """Each setting names where it came from; the operator's word wins over the profile's."""
    fleet = _fleet(tmp_path)
    store = write_profiles(fleet, [128, 1024], [128], profile_extra={"scheduler": _SCHEDULER})
    profile = read_store(store).store.profiles[0]
    s = scheduling("e", profile, None, None)
    assert (s.max_num_batched_tokens, s.max_num_batched_tokens_source) == (
        256,
        "profile, from the engine",
    )
    assert (s.max_num_seqs, s.max_num_seqs_source) == (8, "profile, from the limits")
    assert (s.chunked_prefill, s.chunked_prefill_source) == (True, "default")
    assert (s.mixing, s.mixing_share, s.mixing_step_s, s.mixing_detail) == (
        "assumed",
        1.0,
        0.0,
        ASSUMED_MIXING,
    )
    given = _limits({"max_num_batched_tokens": 512, "enable_chunked_prefill": False})
    s = scheduling("e", profile, given, None)
    assert (s.max_num_batched_tokens, s.max_num_batched_tokens_source) == (512, "--limits")
    assert (s.chunked_prefill, s.chunked_prefill_source) == (False, "--limits")
    assert (s.max_num_seqs, s.max_num_seqs_source) == (8, "profile, from the limits")
    s = scheduling("e", profile, given, 1024)
    assert (s.max_num_batched_tokens, s.max_num_batched_tokens_source) == (
        1024,
        "--max-num-batched-tokens",
    )
    (tmp_path / "old").mkdir()
    old = write_profiles(_fleet(tmp_path / "old"), [128, 1024], [128])  # no scheduler: older
    s = scheduling("e", read_store(old).store.profiles[0], None, None)
    assert (s.max_num_batched_tokens, s.max_num_batched_tokens_source, s.max_num_seqs) == (
        8192,
        "default",
        None,
    )
    assert s.max_num_seqs_source == "none given"


def test_prediction_says_which_mixing_model_it_used(tmp_path: Path) -> None:
    """A profile with a mixing fit: the prediction uses it and says so, with the settings."""
    fleet = _fleet(tmp_path)
    store = write_profiles(
        fleet,
        [128, 1024],
        [512],
        concurrency=[1, 4, 8],
        profile_extra={"scheduler": _SCHEDULER, "mixing_fit": _MIXING},
    )
    assert json.loads(store.read_text())["format_version"] == 2
    doc = predict(
        PredictRequest(
            fleet=fleet,
            profiles=store,
            limits=None,
            shape=TrialShape(512, 32, 20),
            target=TrialTarget(Decimal("1"), Decimal("0.1"), Decimal("0.9")),
            rate=2.0,
            find_max_rate=False,
        )
    )
    e = doc.inputs.engines["e"]
    assert (e.mixing, e.mixing_share, e.mixing_step_s) == ("measured", 0.9, 0.002)
    assert "4 mixing points" in e.mixing_detail and "mean error 3.0%" in e.mixing_detail
    assert (e.max_num_batched_tokens, e.max_num_batched_tokens_source) == (
        256,
        "profile, from the engine",
    )
    assert doc.inputs.max_num_batched_tokens is None


def test_a_mixing_fit_off_by_more_than_half_is_refused(tmp_path: Path) -> None:
    """The fit a point measured below zero once pulled to no cost (302 % mean error on vLLM) is
    not used: the prediction falls back to vLLM's chunked prefill and the detail warns, naming
    the fit and its error; a fit at the limit is still used."""
    fleet = _fleet(tmp_path)
    broken = {
        **_MIXING,
        "coefficients": {"share": 0.0, "step_s": 0.0},
        "mean_rel_error": 3.02,
        "worst_rel_error": 9.0,
    }
    store = write_profiles(
        fleet, [128, 1024], [128], profile_extra={"scheduler": _SCHEDULER, "mixing_fit": broken}
    )
    s = scheduling("e", read_store(store).store.profiles[0], None, None)
    assert (s.mixing, s.mixing_share, s.mixing_step_s) == ("assumed", 1.0, 0.0)
    assert s.mixing_detail.startswith("assumed, WARNING: the profile's mixing fit is refused")
    assert "0.00 of a prefill's on-device time" in s.mixing_detail
    assert "mean error 302.0%" in s.mixing_detail and "over 50%" in s.mixing_detail
    (tmp_path / "limit").mkdir()
    at_limit = {**broken, "mean_rel_error": MIXING_MEAN_LIMIT, "worst_rel_error": 0.9}
    store = write_profiles(
        _fleet(tmp_path / "limit"),
        [128, 1024],
        [128],
        profile_extra={"scheduler": _SCHEDULER, "mixing_fit": at_limit},
    )
    s = scheduling("e", read_store(store).store.profiles[0], None, None)
    assert (s.mixing, s.mixing_share) == ("measured", 0.0)
