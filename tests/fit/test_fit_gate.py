"""Unit tests for the prefill gate (mean <= 0.20, worst point <= 0.50)."""

from __future__ import annotations

import math

import pytest

from narwhal_fit import GateVerdict, PointResidual, PrefillFit, fit_prefill, gate_prefill


def _fit_with_errors(errors: dict[int, float]) -> PrefillFit:
    """A PrefillFit whose residuals have the given relative errors (observed 1.0)."""
    residuals = tuple(
        PointResidual(x=(n,), observed=1.0, predicted=1.0 + e, rel_error=e)
        for n, e in errors.items()
    )
    worst = max(residuals, key=lambda r: r.rel_error)
    lengths = sorted(errors)
    return PrefillFit(
        coefficients={"a": 1.0, "b": 0.0, "c": 0.0},
        domain={"min_len": lengths[0], "max_len": lengths[-1], "lengths": lengths},
        residuals=residuals,
        mean_rel_error=math.fsum(errors.values()) / len(errors),
        worst_rel_error=worst.rel_error,
        worst_point=worst.x,
    )


def test_good_fit_passes() -> None:
    """A fit within both limits passes with no reason."""
    verdict = gate_prefill(_fit_with_errors({256: 0.1, 512: 0.05, 1024: 0.0}))
    assert verdict == GateVerdict(
        passed=True,
        reason=None,
        mean=pytest.approx(0.05),  # type: ignore[arg-type]
        worst=0.1,
        worst_point=(256,),
        mean_limit=0.20,
        worst_limit=0.50,
    )


def test_mean_breach_reason() -> None:
    """A mean over 0.20 fails with the seed's wording."""
    verdict = gate_prefill(_fit_with_errors({256: 0.27, 512: 0.27, 1024: 0.27}))
    assert not verdict.passed
    assert verdict.reason == "prefill fit mean relative error 0.27 exceeds 0.20"


def test_worst_breach_names_point() -> None:
    """A worst point over 0.50 fails naming its length in tokens."""
    verdict = gate_prefill(_fit_with_errors({256: 0.62, 512: 0.0, 1024: 0.0, 2048: 0.0}))
    assert not verdict.passed
    assert list(verdict.worst_point) == [256]
    assert verdict.reason == (
        "prefill fit worst-point relative error 0.62 at 256 tokens exceeds 0.50"
    )


def test_both_breaches_joined() -> None:
    """Both breaches are reported, mean first."""
    verdict = gate_prefill(_fit_with_errors({256: 0.9, 512: 0.1, 1024: 0.1}))
    assert verdict.reason is not None
    assert verdict.reason.startswith("prefill fit mean relative error 0.37 exceeds 0.20; ")
    assert verdict.reason.endswith("0.90 at 256 tokens exceeds 0.50")


def test_limits_are_inclusive() -> None:
    """Errors exactly at the limits pass (mean <= 0.20, worst <= 0.50)."""
    verdict = gate_prefill(_fit_with_errors({256: 0.5, 512: 0.05, 1024: 0.05}))
    assert verdict.mean == pytest.approx(0.2)
    assert verdict.passed, verdict.reason


def test_reason_shows_enough_digits() -> None:
    """A value that rounds to the limit at two decimals is shown with more digits."""
    verdict = gate_prefill(_fit_with_errors({256: 0.2004, 512: 0.2004, 1024: 0.2004}))
    assert verdict.reason == "prefill fit mean relative error 0.2004 exceeds 0.2000"


def test_custom_limits() -> None:
    """Callers may tighten the limits."""
    fit = _fit_with_errors({256: 0.1, 512: 0.1, 1024: 0.1})
    assert gate_prefill(fit).passed
    verdict = gate_prefill(fit, mean_limit=0.05, worst_limit=0.08)
    assert not verdict.passed
    assert verdict.mean_limit == 0.05


@pytest.mark.parametrize("bad", [0.0, -0.1, math.nan, math.inf])
def test_invalid_limits(bad: float) -> None:
    """Limits must be finite and positive."""
    fit = _fit_with_errors({256: 0.1, 512: 0.1, 1024: 0.1})
    with pytest.raises(ValueError, match="mean_limit"):
        gate_prefill(fit, mean_limit=bad)


def test_decreasing_ttft_fails_gate() -> None:
    """TTFT that falls with length cannot be fitted by a non-negative quadratic."""
    fit = fit_prefill([256, 1024, 4096, 16384], [0.4, 0.2, 0.1, 0.05])
    verdict = gate_prefill(fit)
    assert not verdict.passed
    assert verdict.worst > 0.5


def test_oscillating_ttft_fails_gate() -> None:
    """Strongly oscillating TTFT fails the gate."""
    fit = fit_prefill([256, 512, 1024, 2048, 4096, 8192], [0.02, 0.3, 0.02, 0.3, 0.02, 0.3])
    assert not gate_prefill(fit).passed
