"""Each engine's scheduler settings and prefill/decode mixing as ``predict`` uses them, with where
each came from (docs/design.md §13).

Precedence, per setting: what the operator gave ``predict`` (``--max-num-batched-tokens``, then
its ``--limits`` file), then the profile (read from the engine, or from the limits file given when
it was measured), then the predictor's default (vLLM's chunked prefill with a budget of 8,192
tokens, no cap on running sequences). The mixing is the profile's measured fit when it has one,
else vLLM's chunked prefill: one shared step, the prefill chunks' whole cost on the decodes.
"""

from __future__ import annotations

from dataclasses import dataclass

from narwhal_store import LimitsFile, Profile
from narwhal_trial._vtime import DEFAULT_MAX_NUM_BATCHED_TOKENS

ASSUMED_MIXING = (
    "assumed: the profile has no mixing points (narwhal-profile --mixing measures them), so "
    "vLLM's chunked prefill: decodes and prefill chunks share one step"
)


@dataclass(frozen=True, slots=True)
class Scheduling:
    """One engine's settings for the virtual fleet, and their sources."""

    budget: int
    budget_source: str
    chunked: bool
    chunked_source: str
    max_num_seqs: int | None
    max_num_seqs_source: str
    mixing: str  # "measured" | "assumed"
    share: float
    step_s: float
    mixing_detail: str

    def describe(self) -> str:
        """One line: every setting with its source, and the mixing model."""
        seqs = "unbounded" if self.max_num_seqs is None else str(self.max_num_seqs)
        return (
            f"budget {self.budget} tokens ({self.budget_source}), chunked prefill "
            f"{'on' if self.chunked else 'off'} ({self.chunked_source}), max_num_seqs {seqs} "
            f"({self.max_num_seqs_source}); mixing {self.mixing_detail}"
        )


def _profile_int(profile: Profile, name: str) -> tuple[int | None, str]:
    settings = profile.scheduler
    if settings is None:
        return None, ""
    value = getattr(settings, name)
    return value.value, f"profile, from the {value.source}"


def scheduling(
    iid: str, profile: Profile, limits: LimitsFile | None, budget_override: int | None
) -> Scheduling:
    """Resolve engine ``iid``'s settings (see the module docstring for the precedence)."""
    given = None if limits is None else limits.engines.get(iid)
    settings = profile.scheduler

    budget, budget_source = budget_override, "--max-num-batched-tokens"
    if budget is None and given is not None and given.max_num_batched_tokens is not None:
        budget, budget_source = given.max_num_batched_tokens, "--limits"
    if budget is None:
        budget, budget_source = _profile_int(profile, "max_num_batched_tokens")
    if budget is None:
        budget, budget_source = DEFAULT_MAX_NUM_BATCHED_TOKENS, "default"

    chunked, chunked_source = None, ""
    if given is not None and given.enable_chunked_prefill is not None:
        chunked, chunked_source = given.enable_chunked_prefill, "--limits"
    elif settings is not None and settings.chunked_prefill.value is not None:
        chunked = settings.chunked_prefill.value
        chunked_source = f"profile, from the {settings.chunked_prefill.source}"
    if chunked is None:
        chunked, chunked_source = True, "default"

    seqs, seqs_source = None, ""
    if given is not None and given.max_num_seqs is not None:
        seqs, seqs_source = given.max_num_seqs, "--limits"
    else:
        seqs, seqs_source = _profile_int(profile, "max_num_seqs")
    if seqs is None:
        seqs_source = "none given"

    fit = profile.mixing_fit
    if fit is None:
        return Scheduling(
            budget, budget_source, chunked, chunked_source, seqs, seqs_source,
            "assumed", 1.0, 0.0, ASSUMED_MIXING,
        )  # fmt: skip
    share, step_s = fit.coefficients["share"], fit.coefficients["step_s"]
    extra = fit.model_extra or {}
    points = extra.get("residuals")
    count = len(points) if isinstance(points, list) else None
    error = extra.get("mean_rel_error")
    evidence = ", ".join(
        part
        for part in (
            None if count is None else f"{count} mixing points",
            None if not isinstance(error, int | float) else f"mean error {error:.1%}",
        )
        if part
    )
    detail = (
        f"measured: {share:.2f} of a prefill's on-device time and {step_s * 1e3:.2f} ms per mixed "
        f"step land on the running decodes ({evidence or 'the profile'})"
    )
    return Scheduling(
        budget, budget_source, chunked, chunked_source, seqs, seqs_source,
        "measured", share, step_s, detail,
    )  # fmt: skip
