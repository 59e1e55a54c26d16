"""Unit tests for the prefill form ttft-quadratic-v1."""

from __future__ import annotations

import math

import numpy as np
import pytest

from narwhal_fit import (
    PREFILL_FORM,
    FitError,
    InsufficientDataError,
    PrefillFit,
    fit_prefill,
    median_by_length,
)

LENGTHS = [256, 512, 1024, 2048, 4096, 8192, 16384]
# AIConfigurator kernel TTFTs, Llama-3.1-8B on H100, ms (reference §3.1).
H100_KERNEL_MS = [8.7, 12.0, 22.1, 43.5, 90.1, 199.7, 440.2]


def test_reference_kernel_table_matches_documented_errors() -> None:
    """The 1/y quadratic on the H100 kernel table gives the reference's 4.1% mean, 7.8% worst."""
    fit = fit_prefill(LENGTHS, [v / 1e3 for v in H100_KERNEL_MS])
    assert fit.mean_rel_error == pytest.approx(0.041, abs=0.001)
    assert fit.worst_rel_error == pytest.approx(0.078, abs=0.001)


def test_reference_table_with_api_overhead() -> None:
    """Adding 12 ms of API overhead gives the reference's 2.4% mean, 4.0% worst."""
    fit = fit_prefill(LENGTHS, [(v + 12.0) / 1e3 for v in H100_KERNEL_MS])
    assert fit.mean_rel_error == pytest.approx(0.024, abs=0.001)
    assert fit.worst_rel_error == pytest.approx(0.040, abs=0.001)


def test_exact_recovery_without_noise() -> None:
    """Noise-free quadratic data gives back its coefficients."""
    a, b, c = 0.015, 1.9e-5, 5.1e-10
    ys = [a + b * n + c * n * n for n in LENGTHS]
    fit = fit_prefill(LENGTHS, ys)
    assert fit.coefficients["a"] == pytest.approx(a, rel=1e-6)
    assert fit.coefficients["b"] == pytest.approx(b, rel=1e-6)
    assert fit.coefficients["c"] == pytest.approx(c, rel=1e-6)
    assert fit.worst_rel_error < 1e-9
    assert fit.form == PREFILL_FORM


def test_coefficients_non_negative_when_unconstrained_would_go_negative() -> None:
    """Concave data would want c < 0; NNLS keeps every coefficient >= 0."""
    ys = [0.02 + 0.05 * math.sqrt(n / 16384) for n in LENGTHS]
    fit = fit_prefill(LENGTHS, ys)
    assert all(v >= 0.0 for v in fit.coefficients.values())
    assert fit.coefficients["c"] == 0.0


def test_residuals_sorted_by_length_and_domain() -> None:
    """Unordered input is fitted in length order; domain and residuals agree."""
    fit = fit_prefill([4096, 256, 1024], [0.1, 0.02, 0.04])
    assert [r.x for r in fit.residuals] == [(256,), (1024,), (4096,)]
    assert [r.observed for r in fit.residuals] == [0.02, 0.04, 0.1]
    assert fit.domain == {"min_len": 256, "max_len": 4096, "lengths": [256, 1024, 4096]}
    for r in fit.residuals:
        assert r.rel_error == pytest.approx(abs(r.predicted - r.observed) / r.observed)
    assert fit.worst_rel_error == max(r.rel_error for r in fit.residuals)
    assert fit.mean_rel_error == pytest.approx(np.mean([r.rel_error for r in fit.residuals]))


def test_predict_scalar_and_vector_agree() -> None:
    """predict and predict_many give the same values and the formula a + bL + cL^2."""
    fit = fit_prefill(LENGTHS, [v / 1e3 for v in H100_KERNEL_MS])
    c = fit.coefficients
    xs = np.array([1.0, 300.0, 8192.0, 20000.0])
    many = fit.predict_many(xs)
    assert many.shape == (4,)
    for x, y in zip(xs, many, strict=True):
        assert fit.predict(float(x)) == pytest.approx(y, rel=1e-12)
        assert y == pytest.approx(c["a"] + c["b"] * x + c["c"] * x * x, rel=1e-12)


def test_deterministic() -> None:
    """The same input gives identical documents."""
    ys = [(v + 12.0) / 1e3 for v in H100_KERNEL_MS]
    assert fit_prefill(LENGTHS, ys).to_dict() == fit_prefill(LENGTHS, ys).to_dict()


def test_needs_three_distinct_lengths() -> None:
    """Two lengths are refused with InsufficientDataError (also a ValueError and FitError)."""
    with pytest.raises(InsufficientDataError, match="at least 3 distinct lengths") as info:
        fit_prefill([256, 512], [0.02, 0.03])
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, FitError)


def test_duplicate_length_refused() -> None:
    """A length given twice is refused and the message points at median_by_length."""
    with pytest.raises(InsufficientDataError, match="512 appears more than once"):
        fit_prefill([256, 512, 512, 1024], [0.02, 0.03, 0.031, 0.05])


@pytest.mark.parametrize("bad", [0.0, -0.01, math.nan, math.inf])
def test_non_positive_or_non_finite_ttft_named(bad: float) -> None:
    """A TTFT that is not finite and positive is refused, naming its length and value."""
    with pytest.raises(InsufficientDataError, match=r"ttft_s at length 1024") as info:
        fit_prefill([256, 512, 1024], [0.02, 0.03, bad])
    assert repr(bad) in str(info.value)


@pytest.mark.parametrize("bad", [0, -256, 256.0, True, "256"])
def test_bad_length_refused(bad: object) -> None:
    """Lengths must be integers >= 1."""
    with pytest.raises(InsufficientDataError, match="positive integer"):
        fit_prefill([bad, 512, 1024], [0.02, 0.03, 0.05])  # type: ignore[list-item]


def test_mismatched_sequence_lengths() -> None:
    """Lengths and TTFTs must pair up."""
    with pytest.raises(InsufficientDataError, match="3 lengths but 2 TTFT"):
        fit_prefill([256, 512, 1024], [0.02, 0.03])


def test_median_by_length() -> None:
    """Medians per length, ascending keys; even counts average the middle two."""
    out = median_by_length({1024: [0.05, 0.04, 0.06], 256: [0.02, 0.03], 512: [0.025]})
    assert list(out) == [256, 512, 1024]
    assert out == {256: pytest.approx(0.025), 512: 0.025, 1024: 0.05}


def test_median_by_length_refuses_empty_and_bad_values() -> None:
    """An empty timing list or a non-finite timing is refused naming the length."""
    with pytest.raises(InsufficientDataError, match="length 512 has no timings"):
        median_by_length({512: []})
    with pytest.raises(InsufficientDataError, match="length 256"):
        median_by_length({256: [0.02, math.nan, 0.03]})


def test_fit_is_frozen() -> None:
    """Fit objects are immutable."""
    fit = fit_prefill([256, 512, 1024], [0.02, 0.03, 0.05])
    assert isinstance(fit, PrefillFit)
    with pytest.raises(AttributeError):
        fit.mean_rel_error = 0.0  # type: ignore[misc]


def test_numpy_and_scipy_are_loaded_by_the_first_fit_not_by_the_import() -> None:
    """``import narwhal_fit`` stays cheap: numpy and the solver arrive with the first
    fit, so a command that imports the package pays for them only when it fits."""
    import subprocess
    import sys

    probe = (
        "import sys, narwhal_fit\n"
        "before = [m for m in ('numpy', 'scipy') if m in sys.modules] or ['none']\n"
        "narwhal_fit.fit_prefill([256, 1024, 4096], [0.02, 0.04, 0.1])\n"
        "print(*before, 'numpy' in sys.modules, 'scipy.optimize' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.split() == ["none", "True", "True"]
