"""Unit tests for the decode form tpot-batch-context-v1."""

from __future__ import annotations

import math

import numpy as np
import pytest

from narwhal_fit import DECODE_FORM, DecodeFit, DecodePoint, InsufficientDataError, fit_decode

# AIConfigurator kernel TPOTs, Llama-3.1-8B on H200, ms (reference §3.1); OSL 128.
H200_TPOT_MS = {
    512: [4.85, 5.04, 5.37, 6.11],
    4096: [4.96, 5.59, 7.44, 11.26],
    8192: [5.04, 6.14, 9.61, 17.34],
}
CONCURRENCY = [1, 4, 16, 48]


def _reference_points() -> list[DecodePoint]:
    return [
        DecodePoint(n, isl + 63.5, ms / 1e3, input_len=isl)
        for isl, row in H200_TPOT_MS.items()
        for n, ms in zip(CONCURRENCY, row, strict=True)
    ]


def test_reference_table_fits_within_reference_error() -> None:
    """The H200 kernel table fits with worst error under the reference's 8%, d2 near 3.1e-8."""
    fit = fit_decode(_reference_points())
    assert fit.form == DECODE_FORM
    assert fit.worst_rel_error < 0.08
    assert fit.coefficients["d2"] == pytest.approx(3.1e-8, rel=0.15)
    assert fit.coefficients["d0"] == pytest.approx(5.0e-3, rel=0.1)
    assert fit.domain == {
        "concurrency": [1, 4, 16, 48],
        "ctx_min": 575.5,
        "ctx_max": 8255.5,
        "input_lens": [512, 4096, 8192],
    }


def test_exact_recovery_without_noise() -> None:
    """Noise-free data gives back d0, d1, d2."""
    d0, d1, d2 = 5.3e-3, 5e-6, 3.1e-8
    points = [
        DecodePoint(n, ctx, d0 + d1 * n + d2 * n * ctx)
        for n in CONCURRENCY
        for ctx in (575.5, 4159.5, 8255.5)
    ]
    fit = fit_decode(points)
    for key, want in (("d0", d0), ("d1", d1), ("d2", d2)):
        assert fit.coefficients[key] == pytest.approx(want, rel=1e-6)
    assert fit.worst_rel_error < 1e-9


def test_residuals_keep_point_order_and_repeats() -> None:
    """Repeated (n, ctx) points are kept, in the given order, with x = (n, ctx)."""
    points = [
        DecodePoint(4, 600.0, 0.006),
        DecodePoint(1, 600.0, 0.005),
        DecodePoint(4, 600.0, 0.0062),
    ]
    fit = fit_decode(points)
    assert [r.x for r in fit.residuals] == [(4, 600.0), (1, 600.0), (4, 600.0)]
    assert [r.observed for r in fit.residuals] == [0.006, 0.005, 0.0062]
    assert "input_lens" not in fit.domain


def test_input_lens_only_when_every_point_has_one() -> None:
    """The domain lists input lengths only when all points carry them."""
    points = [DecodePoint(1, 600.0, 0.005, input_len=512), DecodePoint(4, 600.0, 0.006)]
    assert "input_lens" not in fit_decode(points).domain


def test_predict_scalar_and_vector_broadcast() -> None:
    """predict_many broadcasts concurrency against ctx and agrees with predict."""
    fit = fit_decode(_reference_points())
    grid = fit.predict_many(np.array([[1], [16]]), np.array([512.0, 8192.0]))
    assert grid.shape == (2, 2)
    assert grid[1, 1] == pytest.approx(fit.predict(16, 8192.0), rel=1e-12)
    c = fit.coefficients
    assert fit.predict(16, 8192.0) == pytest.approx(
        c["d0"] + c["d1"] * 16 + c["d2"] * 16 * 8192.0, rel=1e-12
    )


def test_needs_two_concurrencies() -> None:
    """Points at a single concurrency are refused."""
    with pytest.raises(InsufficientDataError, match="two or more distinct concurrencies"):
        fit_decode([DecodePoint(4, 600.0, 0.006), DecodePoint(4, 4000.0, 0.008)])


@pytest.mark.parametrize("bad", [0.0, -1e-3, math.nan, math.inf])
def test_bad_tpot_named(bad: float) -> None:
    """A TPOT that is not finite and positive is refused, naming the point and value."""
    with pytest.raises(InsufficientDataError, match=r"decode point\[1\]\.tpot_s") as info:
        fit_decode([DecodePoint(1, 600.0, 0.005), DecodePoint(4, 600.0, bad)])
    assert repr(bad) in str(info.value)


def test_bad_concurrency_and_ctx() -> None:
    """Concurrency must be an integer >= 1 and ctx finite and >= 0."""
    with pytest.raises(InsufficientDataError, match="concurrency"):
        fit_decode([DecodePoint(0, 600.0, 0.005), DecodePoint(4, 600.0, 0.006)])
    with pytest.raises(InsufficientDataError, match="ctx"):
        fit_decode([DecodePoint(1, -1.0, 0.005), DecodePoint(4, 600.0, 0.006)])
    with pytest.raises(InsufficientDataError, match="ctx"):
        fit_decode([DecodePoint(1, math.inf, 0.005), DecodePoint(4, 600.0, 0.006)])


def test_fit_type() -> None:
    """fit_decode returns a DecodeFit with the three named coefficients."""
    fit = fit_decode(_reference_points())
    assert isinstance(fit, DecodeFit)
    assert sorted(fit.coefficients) == ["d0", "d1", "d2"]
