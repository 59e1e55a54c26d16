"""gated_prefill_fit: the prefill fit and gates shared by live sweeps and refits."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from narwhal_fit import FitConvergenceError, PrefillFit, fit_prefill
from narwhal_profile_cli._errors import ProfileAbortError, ProfileUsageError
from narwhal_profile_cli.sweeps._prefill_gate import gated_prefill_fit

QUADRATIC = {n: [0.013 + 1.9e-5 * n + 5.1e-10 * n * n] for n in (256, 1024, 4096, 16384)}


def _diverging(lengths: Sequence[int], ttft_s: Sequence[float]) -> PrefillFit:
    raise FitConvergenceError("no convergence")


def test_gate_passes_with_the_given_fit() -> None:
    """Medians on a quadratic pass; the given fit callable is the one used."""
    calls: list[list[int]] = []

    def fit(lengths: Sequence[int], ttft_s: Sequence[float]) -> PrefillFit:
        calls.append(list(lengths))
        return fit_prefill(lengths, ttft_s)

    result = gated_prefill_fit(QUADRATIC, subject="engine e0", iid="e0", fit=fit)
    assert calls == [[256, 1024, 4096, 16384]]
    assert result.mean_rel_error < 0.01


def test_too_few_lengths_abort_live_but_refuse_a_refit() -> None:
    """Two lengths abort a live sweep (exit 1) but are a usage error (exit 2) in a refit."""
    few = {256: [0.02], 1024: [0.03]}
    with pytest.raises(ProfileAbortError) as live:
        gated_prefill_fit(few, subject="engine e0", iid="e0")
    assert live.value.message.startswith("engine e0: the prefill fit failed: ")
    assert (live.value.code, live.value.exit_code, live.value.engine) == ("prefill_fit", 1, "e0")
    with pytest.raises(ProfileUsageError) as refit:
        gated_prefill_fit(few, subject="profile P", iid="e0", refit_code="refit_input")
    assert refit.value.message.startswith(
        "profile P: the retained prefill samples cannot be refitted: "
    )
    assert (refit.value.code, refit.value.exit_code) == ("refit_input", 2)


def test_a_failing_fit_aborts_in_both_modes() -> None:
    """A fit that fails for other reasons aborts with code prefill_fit, worded per mode."""
    with pytest.raises(ProfileAbortError) as live:
        gated_prefill_fit(QUADRATIC, subject="engine e0", iid="e0", fit=_diverging)
    assert live.value.message == "engine e0: the prefill fit failed: no convergence"
    with pytest.raises(ProfileAbortError) as refit:
        gated_prefill_fit(
            QUADRATIC, subject="profile P", iid="e0", fit=_diverging, refit_code="refit_input"
        )
    assert refit.value.message == "profile P: the prefill refit failed: no convergence"
    assert refit.value.code == "prefill_fit"


def test_both_gates_named_when_both_fail() -> None:
    """Scattered medians that fail both gates name both limits; the code is the mean gate's."""
    scattered = {256: [0.5], 1024: [0.01], 2048: [0.4], 4096: [0.02], 8192: [0.6], 16384: [0.05]}
    with pytest.raises(ProfileAbortError) as caught:
        gated_prefill_fit(scattered, subject="profile P", iid="e1")
    message = caught.value.message
    assert message.startswith(
        "profile P: the representative prefill fit exceeds 20% mean error; "
        "the representative prefill fit exceeds 50% worst-point error (mean "
    )
    assert caught.value.code == "prefill_mean_error"
