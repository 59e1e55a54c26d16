"""Each engine's scheduler settings and prefill/decode mixing as ``predict`` uses them, with where
each came from (docs/design.md §13).

Precedence, per setting: what the operator gave ``predict`` (``--max-num-batched-tokens``, then
its ``--limits`` file), then what the frontend publishes of its workers (``--frontend URL``: NVIDIA
Dynamo's ``dynamo_frontend_model_*`` gauges), then the profile (read from the engine, or from the
limits file given when it was measured), then the predictor's default (vLLM's chunked prefill
with a budget of 8,192 tokens, no cap on running sequences). The mixing is the profile's measured
fit when it has one whose mean error is at most :data:`MIXING_MEAN_LIMIT`, else vLLM's chunked
prefill: one shared step, the prefill chunks' whole cost on the decodes. A fit over the limit is
refused with a warning in its detail: it describes its own points worse than by half, and one
that came out at no cost would let every prefill run beside the decodes for free.
"""

from __future__ import annotations

from typing import Any

from narwhal_store import LimitsFile, Profile
from narwhal_trial.documents._frontend import FrontendScheduler
from narwhal_trial.documents._prediction import EngineSettings
from narwhal_trial.predictor._vtime import DEFAULT_MAX_NUM_BATCHED_TOKENS

CHUNKED_PREFILL = "vLLM's chunked prefill: decodes and prefill chunks share one step"
ASSUMED_MIXING = (
    "assumed: the profile has no mixing points (narwhal-profile --mixing measures them), so "
    f"{CHUNKED_PREFILL}"
)
MIXING_MEAN_LIMIT = 0.5
"""The largest mean relative error of a profile's mixing fit the predictor uses. Fits on vLLM's
CPU server came out at 5-7 %; the one refused by it (a point measured below zero pulled it to no
cost at all) at 302 %."""


def _first(*candidates: tuple[Any, str]) -> tuple[Any, str]:
    """The first candidate (value, source) with a value; (None, "none given") without one."""
    for value, source in candidates:
        if value is not None:
            return value, source
    return None, "none given"


def _profiled(profile: Profile, name: str) -> tuple[Any, str]:
    """The profile's setting ``name`` and ``profile, from the <its source>``."""
    setting = None if profile.scheduler is None else getattr(profile.scheduler, name)
    if setting is None or setting.value is None:
        return None, ""
    return setting.value, f"profile, from the {setting.source}"


def _mixing(profile: Profile) -> tuple[bool, float, float, str]:
    """(measured, share, step_s, the model in words)."""
    fit = profile.mixing_fit
    if fit is None:
        return False, 1.0, 0.0, ASSUMED_MIXING
    share, step_s = fit.coefficients["share"], fit.coefficients["step_s"]
    extra = fit.model_extra or {}
    points = extra.get("residuals")
    error = extra.get("mean_rel_error")
    evidence = ", ".join(
        part
        for part in (
            f"{len(points)} mixing points" if isinstance(points, list) else None,
            f"mean error {error:.1%}" if isinstance(error, int | float) else None,
        )
        if part
    )
    model = (
        f"{share:.2f} of a prefill's on-device time and {step_s * 1e3:.2f} ms per mixed step land "
        f"on the running decodes ({evidence or 'the profile'})"
    )
    if isinstance(error, int | float) and error > MIXING_MEAN_LIMIT:
        refused = (
            f"assumed, WARNING: the profile's mixing fit is refused, its mean error is over "
            f"{MIXING_MEAN_LIMIT:.0%} ({model}); so {CHUNKED_PREFILL}"
        )
        return False, 1.0, 0.0, refused
    return True, share, step_s, f"measured: {model}"


def scheduling(
    iid: str,
    profile: Profile,
    limits: LimitsFile | None,
    budget_override: int | None,
    published: FrontendScheduler | None = None,
) -> EngineSettings:
    """Engine ``iid``'s settings (see the module docstring for the precedence), as the
    prediction document states them."""
    given = None if limits is None else limits.engines.get(iid)
    front = "frontend" if published is None else f"frontend, {published.source}"
    budget, budget_source = _first(
        (budget_override, "--max-num-batched-tokens"),
        (None if given is None else given.max_num_batched_tokens, "--limits"),
        (None if published is None else published.max_num_batched_tokens, front),
        _profiled(profile, "max_num_batched_tokens"),
        (DEFAULT_MAX_NUM_BATCHED_TOKENS, "default"),
    )
    chunked, chunked_source = _first(
        (None if given is None else given.enable_chunked_prefill, "--limits"),
        _profiled(profile, "chunked_prefill"),
        (True, "default"),
    )
    seqs, seqs_source = _first(
        (None if given is None else given.max_num_seqs, "--limits"),
        (None if published is None else published.max_num_seqs, front),
        _profiled(profile, "max_num_seqs"),
    )
    measured, share, step_s, detail = _mixing(profile)
    return EngineSettings(
        max_num_batched_tokens=int(budget),
        max_num_batched_tokens_source=budget_source,
        chunked_prefill=bool(chunked),
        chunked_prefill_source=chunked_source,
        max_num_seqs=None if seqs is None else int(seqs),
        max_num_seqs_source=seqs_source,
        mixing="measured" if measured else "assumed",
        mixing_share=share,
        mixing_step_s=step_s,
        mixing_detail=detail,
    )
