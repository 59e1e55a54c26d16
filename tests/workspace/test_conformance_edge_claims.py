"""The conformance tier's prediction claims (tools/conformance/_edge_claims.py): which are
asserted, which only recorded, and that an asserted one still fails when a trial refutes it.
Checked on hand-made predictions and trial counts."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
BAND = {"pass_90": 3.0, "pass_50": 3.2, "pass_10": 3.4, "replications": 100}


@pytest.fixture
def edge(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(REPO))
    # the repo root is on sys.path only inside this fixture
    import tools.conformance._edge_claims as module

    return module


def _rate(edge: ModuleType, rate: float, good: int, low: float, high: float, p: float) -> Any:
    predicted = {
        "attainment": (low + high) / 2,
        "attainment_interval": {"low": low, "high": high},
        "pass_probability": p,
    }
    return edge.RateCheck(rate, predicted, good, 60, True, 0 if good >= 54 else 2)


def _check(edge: ModuleType, low_good: int, high_good: int, high_p: float = 0.0) -> Any:
    goods = (low_good, 60, 58, 40, high_good)
    ranges = ((1.0, 1.0), (0.95, 1.0), (0.8, 1.0), (0.2, 0.9), (0.0, 0.1))
    probabilities = (1.0, 1.0, 0.6, 0.3, high_p)
    rates = [
        _rate(edge, 3.2 * f, g, lo, hi, p)
        for f, g, (lo, hi), p in zip(edge.FACTORS, goods, ranges, probabilities, strict=True)
    ]
    return edge.EdgeCheck(Decimal("0.35"), Decimal("0.0125"), BAND, rates=rates, edge=3.2)


def test_a_slow_patch_at_half_the_edge_is_recorded_not_asserted(edge: ModuleType) -> None:
    check = _check(edge, low_good=55, high_good=1)
    claims = check.claims()
    assert claims["low_range_holds"] is False  # Wilson [0.82, 0.96] misses [1.000, 1.000]
    assert check.asserted_claims() == {
        "low_range_informative": True,
        "high_predicted_miss": True,
        "high_measured_miss": True,
    }
    assert claims["edge_meets_band"] is True  # measured 3.2-3.52 against the band 3.0-3.4
    assert {"low_range_holds", "edge_meets_band"} == edge.RECORDED_ONLY
    assert check.figures()["claims"] == claims  # results.json keeps every claim
    assert check.figures()["probe_after"] is None
    check.probe_after = (1.02, 0.97)
    assert check.figures()["probe_after"] == {"prefill": 1.02, "decode": 0.97}


def test_an_asserted_claim_still_fails_when_the_trial_refutes_it(edge: ModuleType) -> None:
    passes_at_high = _check(edge, low_good=60, high_good=58)
    assert passes_at_high.asserted_claims()["high_measured_miss"] is False
    predicted_pass = _check(edge, low_good=60, high_good=0, high_p=0.4)
    assert predicted_pass.asserted_claims()["high_predicted_miss"] is False
    wide = _check(edge, low_good=60, high_good=0)
    wide.rates[0] = _rate(edge, 1.6, 60, 0.0, 1.0, 0.7)
    assert wide.asserted_claims()["low_range_informative"] is False
    below_band = _check(edge, low_good=60, high_good=0)
    below_band.rates[1] = _rate(edge, 2.88, 50, 0.95, 1.0, 1.0)  # misses below pass_90, 3.0
    assert below_band.measured_edge() == (1.6, 2.88)
    assert below_band.claims()["edge_meets_band"] is False


def test_the_brief_names_every_rate_and_the_failed_claim(edge: ModuleType) -> None:
    brief = _check(edge, low_good=55, high_good=1).brief()
    assert "'low_range_holds': False" in brief
    assert "1.6/s: 55/60 [0.82, 0.96], predicted [1.000, 1.000], pass probability 1.00" in brief
    assert "band 3.00 / 3.20 / 3.40 req/s" in brief
    assert brief.count("/s:") == len(edge.FACTORS)


def test_the_slo_moves_by_the_probe_as_predict_believes_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check's SLO times the probe's factors raised to predict's default weight (a quarter
    of their log); weight 1 takes them whole."""
    monkeypatch.syspath_prepend(str(REPO))
    from tools.conformance._edge_check import rescaled_slo

    assert rescaled_slo(Decimal("0.1"), Decimal("0.01"), 1.6, 0.81) == (
        Decimal("0.1125"),
        Decimal("0.00949"),
    )
    assert rescaled_slo(Decimal("0.1"), Decimal("0.01"), 1.6, 0.81, weight=1.0) == (
        Decimal("0.1600"),
        Decimal("0.00810"),
    )
