"""Fit quality on screen: each profile's prefill and decode errors (and its mixing fit's share,
step and errors when it has one), and a warning naming the worst point and its likely cause when a
decode fit is beyond the bounds.

The seed gates only the prefill fit; a decode fit beyond the same figures (narwhal-store's
``DECODE_MEAN_BOUND`` mean and ``DECODE_WORST_BOUND`` worst-point relative error) is stored (the
exit code stays 0) but warned about here, and ``load_trial.py check`` refuses it. Bursty delivery
(the engine's API server flushing several steps at once) is named whenever a cohort's share of
burst intervals reaches ``BURSTY_SHARE``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from narwhal_profile_cli.sweeps._scheduler import scheduler_summary
from narwhal_store import BURSTY_SHARE, FitDoc, FitQuality, Profile, decode_fit_suspect

if TYPE_CHECKING:  # the sweep pulls in narwhal-fit (scipy): not needed to print a result
    from narwhal_profile_cli.sweeps._decode import Cohort

FEW_INTERVALS = 8
"""A cohort whose streams had fewer in-window intervals than this gives a noisy TPOT."""


def mixing_figure(fit: FitDoc) -> dict[str, Any]:
    """A mixing fit's coefficients (``share``, ``step_s``) and its errors, when it has them."""
    figure: dict[str, Any] = {
        "share": fit.coefficients.get("share"),
        "step_s": fit.coefficients.get("step_s"),
    }
    quality = FitQuality.of(fit)
    if quality is not None:
        figure.update(quality.to_dict())
    return figure


def fit_figures(profiles: Sequence[Profile]) -> list[dict[str, Any]]:
    """Per profile: its engine, key label, the prefill and decode errors and its scheduler
    settings (null when the store predates them) (JSON result), and ``mixing`` (its share, step_s
    and errors) only for a profile with a mixing fit."""
    figures = []
    for profile in profiles:
        prefill = FitQuality.of(profile.prefill_fit)
        decode = None if profile.decode_fit is None else FitQuality.of(profile.decode_fit)
        figure = {
            "engine": profile.key.engine,
            "key": profile.key.label(),
            "prefill": None if prefill is None else prefill.to_dict(),
            "decode": None if decode is None else decode.to_dict(),
            "decode_suspect": None if decode is None else decode_fit_suspect(decode),
            "scheduler": None
            if profile.scheduler is None
            else profile.scheduler.model_dump(mode="json"),
        }
        if profile.mixing_fit is not None:
            figure["mixing"] = mixing_figure(profile.mixing_fit)
        figures.append(figure)
    return figures


def _pct(figure: dict[str, Any] | None) -> str:
    if figure is None:
        return "none"
    return f"mean {figure['mean_rel_error']:.1%} worst {figure['worst_rel_error']:.1%}"


def _mixing_text(figure: dict[str, Any]) -> str:
    """``share 0.98, step 0.7 ms, mean 3.1% worst 8.0%``."""
    parts = []
    if isinstance(figure.get("share"), int | float):
        parts.append(f"share {figure['share']:.2f}")
    if isinstance(figure.get("step_s"), int | float):
        parts.append(f"step {figure['step_s'] * 1e3:.2f} ms")
    text = ", ".join(parts)
    if "mean_rel_error" in figure:
        text += f", {_pct(figure)}"
    return text


def fit_lines(figures: Sequence[dict[str, Any]]) -> list[str]:
    """One text line per profile, ``IID: prefill fit mean 2.1% worst 4.0%; decode fit ...`` (and
    ``; mixing fit share 0.98, step 0.70 ms, mean 3.1% worst 8.0%`` when it has one), then, when
    the profile records them, ``IID: scheduler: budget 2048 tokens (engine), ...``."""
    repeated = Counter(f["engine"] for f in figures)
    lines = []
    for f in figures:
        name = f["key"] if repeated[f["engine"]] > 1 else f["engine"]
        flag = " (beyond the decode bounds)" if f["decode_suspect"] else ""
        line = f"{name}: prefill fit {_pct(f['prefill'])}; decode fit {_pct(f['decode'])}{flag}"
        if f.get("mixing") is not None:
            line += f"; mixing fit {_mixing_text(f['mixing'])}"
        lines.append(line)
        if f.get("scheduler") is not None:
            lines.append(f"{name}: scheduler: {scheduler_summary(f['scheduler'])}")
    return lines


def _cohort_at(cohorts: Sequence[Cohort], point: tuple[float, ...]) -> Cohort | None:
    """The valid cohort of the fit point ``(concurrency, ctx)``."""
    for cohort in cohorts:
        p = cohort.point
        if p is not None and (float(p.concurrency), float(p.ctx)) == tuple(point[:2]):
            return cohort
    return None


def _bursty(cohort: Cohort) -> bool:
    return cohort.burst_share is not None and cohort.burst_share >= BURSTY_SHARE


def _likely_cause(
    cohort: Cohort | None, cohorts: Sequence[Cohort], decode_tokens: int, colocated: bool
) -> str:
    bursty = [c for c in cohorts if _bursty(c)]
    if cohort is not None and _bursty(cohort):
        return (
            f"bursty delivery: {cohort.burst_share:.0%} of that cohort's chunk intervals arrived "
            "in bursts (the engine's API server flushed several steps at once: it could not "
            "keep up, so its host set the pace)"
        )
    if cohort is not None and cohort.intervals is not None and cohort.intervals < FEW_INTERVALS:
        return (
            f"too few tokens: only {cohort.intervals} intervals per stream inside that cohort's "
            f"window (raise --decode-tokens above {decode_tokens})"
        )
    if colocated:
        return "neighbour traffic on the shared GPU changed the batch during the window"
    if bursty:
        return f"bursty delivery in {len(bursty)} of {len(cohorts)} cohorts"
    return "the engine's TPOT does not follow the d0 + d1*n + d2*n*ctx form on this domain"


def decode_warnings(
    iid: str,
    decode_fit: FitDoc | None,
    cohorts: Sequence[Cohort],
    *,
    decode_tokens: int,
    colocated: bool,
) -> list[str]:
    """Warnings for one engine's decode fit and delivery (empty when both look sound)."""
    warnings = []
    quality = None if decode_fit is None else FitQuality.of(decode_fit)
    why = None if quality is None else decode_fit_suspect(quality)
    if quality is not None and why is not None:
        cohort = _cohort_at(cohorts, quality.worst_point)
        where = (
            f"input {cohort.input_len} x {cohort.concurrency} streams"
            if cohort is not None
            else f"point {list(quality.worst_point)}"
        )
        cause = _likely_cause(cohort, cohorts, decode_tokens, colocated)
        warnings.append(
            f"{iid}: decode fit {why} (worst at {where}); likely cause: {cause}. The profile "
            "was written; load_trial.py check refuses it"
        )
    bursty = [c for c in cohorts if _bursty(c)]
    if bursty and why is None:
        shown = ", ".join(
            f"input {c.input_len} x {c.concurrency}: {c.burst_share:.0%}" for c in bursty[:4]
        )
        warnings.append(
            f"{iid}: bursty delivery in {len(bursty)} decode cohort(s) ({shown} of chunk "
            "intervals in bursts): the engine's API server could not keep up; its TPOT was "
            "counted exactly but set by the host"
        )
    return warnings
