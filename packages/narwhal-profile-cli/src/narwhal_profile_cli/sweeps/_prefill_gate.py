"""Fitting TTFT medians and applying the reference's prefill gates (live sweep and refit).

The representative fit must pass narwhal-fit's ``gate_prefill`` (its ``DEFAULT_MEAN_LIMIT`` mean
and ``DEFAULT_WORST_LIMIT`` worst-point error), else the profile aborts (exit 1) with the
reference's wording and code ``prefill_mean_error`` or ``prefill_worst_error``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from narwhal_fit import (
    FitError,
    InsufficientDataError,
    PrefillFit,
    fit_prefill,
    gate_prefill,
    median_by_length,
)
from narwhal_profile_cli._errors import ProfileAbortError, ProfileUsageError

__all__ = ["FitPrefill", "gated_prefill_fit"]

FitPrefill = Callable[[Sequence[int], Sequence[float]], PrefillFit]


def gated_prefill_fit(
    raw: Mapping[int, Sequence[float]],
    *,
    subject: str,
    iid: str,
    fit: FitPrefill = fit_prefill,
    refit_code: str | None = None,
) -> PrefillFit:
    """Fit the per-length medians of ``raw`` (length → every TTFT, seconds) and gate the fit.

    Messages start with ``subject`` (``engine e0``, ``profile <label>``) and name engine ``iid``.
    A failed fit aborts with code ``prefill_fit``. With ``refit_code`` the timings are retained
    samples being refitted: too few or unusable ones are then a usage error (exit 2) with that
    code, and a failed fit reads "the prefill refit failed".
    """
    try:
        medians = median_by_length(raw)
        result = fit(list(medians), list(medians.values()))
    except InsufficientDataError as exc:
        if refit_code is None:
            raise _fit_failed(subject, iid, "fit", exc) from exc
        raise ProfileUsageError(
            f"{subject}: the retained prefill samples cannot be refitted: {exc}",
            engine=iid,
            code=refit_code,
        ) from exc
    except FitError as exc:
        raise _fit_failed(subject, iid, "fit" if refit_code is None else "refit", exc) from exc
    verdict = gate_prefill(result)
    if verdict.passed:
        return result
    worst_at = ", ".join(f"{v:g}" for v in verdict.worst_point)
    figures = f"mean {verdict.mean:.1%}, worst {verdict.worst:.1%} at {worst_at} tokens"
    exceeded = []
    if verdict.mean > verdict.mean_limit:
        exceeded.append(
            f"the representative prefill fit exceeds {verdict.mean_limit:.0%} mean error"
        )
    if verdict.worst > verdict.worst_limit:
        exceeded.append(
            f"the representative prefill fit exceeds {verdict.worst_limit:.0%} worst-point error"
        )
    code = "prefill_mean_error" if verdict.mean > verdict.mean_limit else "prefill_worst_error"
    raise ProfileAbortError(f"{subject}: {'; '.join(exceeded)} ({figures})", engine=iid, code=code)


def _fit_failed(subject: str, iid: str, what: str, exc: FitError) -> ProfileAbortError:
    return ProfileAbortError(
        f"{subject}: the prefill {what} failed: {exc}", engine=iid, code="prefill_fit"
    )
