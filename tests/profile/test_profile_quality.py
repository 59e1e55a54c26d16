"""Fit quality on screen: the per-profile lines and the decode-fit warnings' causes."""

from __future__ import annotations

from typing import Any

import pytest

from narwhal_fit import DecodePoint
from narwhal_profile_cli.results._quality import decode_warnings, fit_lines
from narwhal_profile_cli.sweeps._decode import Cohort
from narwhal_store import DecodeFitDoc


def _fit(mean: float, worst: float, point: tuple[float, float] = (4.0, 600.0)) -> DecodeFitDoc:
    return DecodeFitDoc.model_validate(
        {
            "form": "tpot-batch-context-v1",
            "coefficients": {"d0": 0.005, "d1": 0.0, "d2": 0.0},
            "domain": {},
            "mean_rel_error": mean,
            "worst_rel_error": worst,
            "worst_point": list(point),
        }
    )


def _cohort(n: int, ctx: float, *, bursts: float = 0.0, intervals: int = 40) -> Cohort:
    point = DecodePoint(concurrency=n, ctx=ctx, tpot_s=0.005, input_len=512)
    return Cohort(512, n, 0, [], point, None, intervals=intervals, burst_share=bursts)


def _warn(fit: DecodeFitDoc, cohorts: list[Cohort], colocated: bool = False) -> list[str]:
    return decode_warnings("e0", fit, cohorts, decode_tokens=24, colocated=colocated)


def test_a_sound_decode_fit_gives_no_warning() -> None:
    assert _warn(_fit(0.05, 0.2), [_cohort(1, 600.0), _cohort(4, 600.0)]) == []


@pytest.mark.parametrize(("mean", "worst"), [(0.21, 0.3), (0.1, 0.51), (0.75, 0.99)])
def test_beyond_either_bound_warns_naming_the_worst_point(mean: float, worst: float) -> None:
    (line,) = _warn(_fit(mean, worst), [_cohort(1, 600.0), _cohort(4, 600.0)])
    assert line.startswith("e0: decode fit ")
    assert "(worst at input 512 x 4 streams)" in line
    assert "load_trial.py check refuses it" in line


def test_the_likely_cause_is_bursty_delivery_when_the_worst_cohort_came_in_bursts() -> None:
    (line,) = _warn(_fit(0.75, 0.99), [_cohort(1, 600.0), _cohort(4, 600.0, bursts=0.62)])
    assert "likely cause: bursty delivery: 62% of that cohort's chunk intervals" in line


def test_the_likely_cause_is_too_few_tokens_for_a_short_window() -> None:
    (line,) = _warn(_fit(0.3, 0.4), [_cohort(1, 600.0), _cohort(4, 600.0, intervals=3)])
    assert "likely cause: too few tokens: only 3 intervals" in line
    assert "raise --decode-tokens above 24" in line


def test_the_likely_cause_is_neighbour_traffic_when_colocated() -> None:
    (line,) = _warn(_fit(0.3, 0.4), [_cohort(1, 600.0), _cohort(4, 600.0)], colocated=True)
    assert "likely cause: neighbour traffic" in line


def test_bursty_cohorts_are_named_even_when_the_fit_is_sound() -> None:
    (line,) = _warn(_fit(0.05, 0.1), [_cohort(1, 600.0, bursts=0.3), _cohort(4, 600.0)])
    assert line.startswith("e0: bursty delivery in 1 decode cohort(s) (input 512 x 1: 30%")


def test_fit_lines_name_the_engine_or_the_key_when_an_engine_repeats() -> None:
    def figure(engine: str, key: str, decode: dict[str, Any] | None) -> dict[str, Any]:
        prefill = {"mean_rel_error": 0.012, "worst_rel_error": 0.03, "worst_point": [256.0]}
        suspect = "mean relative error 75.0% exceeds 20%" if decode and decode["x"] else None
        return {"engine": engine, "key": key, "prefill": prefill, "decode": decode,
                "decode_suspect": suspect}  # fmt: skip

    good = {"mean_rel_error": 0.008, "worst_rel_error": 0.021, "worst_point": [], "x": False}
    bad = {"mean_rel_error": 0.75, "worst_rel_error": 0.99, "worst_point": [], "x": True}
    lines = fit_lines([figure("a", "a (k1)", good), figure("b", "b (k)", bad)])
    assert lines == [
        "a: prefill fit mean 1.2% worst 3.0%; decode fit mean 0.8% worst 2.1%",
        "b: prefill fit mean 1.2% worst 3.0%; decode fit mean 75.0% worst 99.0% "
        "(beyond the decode bounds)",
    ]
    assert fit_lines([figure("a", "a (k1)", None), figure("a", "a (k2)", None)]) == [
        "a (k1): prefill fit mean 1.2% worst 3.0%; decode fit none",
        "a (k2): prefill fit mean 1.2% worst 3.0%; decode fit none",
    ]
