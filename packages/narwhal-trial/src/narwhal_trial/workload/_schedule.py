"""A workload's own schedule (``workload.json`` ``schedule``): a trace's window or synthetic draws.

The runbook's workload has none: every request has the same lengths and ``run --rate`` spaces
them evenly. A scheduled workload holds, column-wise (one entry a request, in due order):

- ``due_offsets_ns``: when each request is due, nanoseconds after the first (which is at 0),
  non-decreasing; equal offsets are sent at the same instant;
- ``input_tokens`` and ``output_tokens``: each request's exact lengths;
- ``hash_ids``: a Mooncake trace's prompt block ids (``block_tokens`` tokens each), or null.

``run --speedup X`` divides every offset by X. The source (``trace`` or ``synthetic``) says where
the schedule came from: the trace's path, SHA-256 and window, or the draws and their seed.
"""

from __future__ import annotations

import math
from typing import Annotated, Final, Literal

from pydantic import ConfigDict, Field, model_validator

from narwhal_store import ClosedModel
from narwhal_trial._errors import TrialUsageError

MAX_SPEEDUP: Final = 1000.0
"""``--speedup`` above this is refused: a trace squeezed 1000-fold is no longer its shape."""
_NS: Final = 1_000_000_000

_Count = Annotated[int, Field(ge=1)]


class _Frozen(ClosedModel):
    model_config = ConfigDict(frozen=True)


class TraceSource(_Frozen):
    """The trace a schedule was read from, and the window taken."""

    kind: Literal["trace"] = "trace"
    path: str
    format: Literal["mooncake", "burstgpt", "azure"]
    sha256: str = Field(description="SHA-256 of the trace file's exact bytes")
    rows: int = Field(ge=0, description="data rows read, before dropping failures and windowing")
    dropped_failures: int = Field(ge=0, description="BurstGPT rows with Response tokens 0")
    start_s: float = Field(ge=0)
    duration_s: float | None = Field(default=None, gt=0)
    limit: int | None = Field(default=None, ge=1)
    clipped: int = Field(
        default=0, ge=0, description="requests clipped to max_model_len (--clip-to-model)"
    )


class SyntheticSource(_Frozen):
    """The draws a synthetic schedule came from (``prepare --arrivals``)."""

    kind: Literal["synthetic"] = "synthetic"
    arrivals: Literal["constant", "poisson", "gamma"]
    rate: float = Field(gt=0, description="mean requests per second")
    burstiness: float | None = Field(
        default=None, gt=0, description="gamma arrivals: the gaps' coefficient of variation"
    )
    input_lengths: str = Field(description="the --input-lengths spec (N, uniform:LO-HI, ...)")
    output_lengths: str
    seed: int = Field(ge=0, description="the draws' seed (the workload's seed)")


class PrefixReuse(_Frozen):
    """Whether equal ``hash_ids`` give a shared token prefix, and how much the trace reuses."""

    holds: bool = Field(
        description="every block id is always preceded by the same ids, so equal ids are an "
        "equal token prefix a prefix cache can hit"
    )
    blocks: int = Field(ge=0, description="blocks in all prompts")
    reused_blocks: int = Field(ge=0, description="blocks whose id an earlier request used")
    reused_tokens: int = Field(ge=0, description="prompt tokens in those blocks")
    problem: str | None = Field(default=None, description="the first id that breaks 'holds'")


class Schedule(_Frozen):
    """Each request's due offset and lengths, column-wise (see the module's docstring)."""

    source: TraceSource | SyntheticSource = Field(discriminator="kind")
    due_offsets_ns: list[Annotated[int, Field(ge=0)]] = Field(min_length=1)
    input_tokens: list[_Count]
    output_tokens: list[_Count]
    hash_ids: list[list[Annotated[int, Field(ge=0)]]] | None = None
    block_tokens: int = Field(ge=1)
    prefix_reuse: PrefixReuse | None = Field(
        default=None, description="null when the schedule has no hash_ids"
    )

    @model_validator(mode="after")
    def _columns(self) -> Schedule:
        n = len(self.due_offsets_ns)
        lengths = [len(self.input_tokens), len(self.output_tokens)]
        if self.hash_ids is not None:
            lengths.append(len(self.hash_ids))
        if any(k != n for k in lengths):
            raise ValueError(f"every column must hold {n} entries (due_offsets_ns), got {lengths}")
        if self.due_offsets_ns[0] != 0:
            raise ValueError("the first due offset must be 0")
        if any(b < a for a, b in zip(self.due_offsets_ns, self.due_offsets_ns[1:], strict=False)):
            raise ValueError("due_offsets_ns must not decrease")
        return self

    @property
    def requests(self) -> int:
        return len(self.due_offsets_ns)

    @property
    def span_s(self) -> float:
        """Seconds from the first due time to the last, at its own pace."""
        return self.due_offsets_ns[-1] / _NS

    def offsets_ns(self, speedup: float = 1.0) -> list[int]:
        """The due offsets with the time axis divided by ``speedup`` (nearest nanosecond)."""
        if speedup == 1.0:
            return list(self.due_offsets_ns)
        return [round(t / speedup) for t in self.due_offsets_ns]

    def mean_rate(self, speedup: float = 1.0) -> float:
        """Requests a second over the schedule at ``speedup`` (``mean_rate_of``)."""
        return mean_rate_of(self.requests, self.span_s / speedup)

    def longest(self) -> int:
        """The request with the most tokens (input + output; the first of equals)."""
        totals = [i + o for i, o in zip(self.input_tokens, self.output_tokens, strict=True)]
        return totals.index(max(totals))


def mean_rate_of(requests: int, span_s: float) -> float:
    """A schedule's mean rate: (n - 1) / span; n a second when the span is 0."""
    return float(requests) if span_s <= 0 else (requests - 1) / span_s


def speedup_refusal(flag: str, label: str, instead: str) -> TrialUsageError:
    """The error for ``flag`` (``--speedup``, ``--start-speedup``) given with the runbook's
    workload ``label``, which runs ``instead`` (``at --rate with --requests``)."""
    return TrialUsageError(
        f"{flag} applies to a scheduled workload (prepare --trace or --arrivals); {label} is the "
        f"runbook's, {instead}"
    )


def check_speedup(speedup: float) -> None:
    """TrialUsageError unless ``0 < speedup <= MAX_SPEEDUP``."""
    if not (math.isfinite(speedup) and 0 < speedup <= MAX_SPEEDUP):
        raise TrialUsageError(
            f"--speedup must be a number > 0 and at most {MAX_SPEEDUP:g}, got {speedup}"
        )


def due_offsets_ns(requests: int, rate: float) -> list[int]:
    """Each offer's due time after t0, nanoseconds: ``round(n / rate x 1e9)``."""
    if not (math.isfinite(rate) and rate > 0):
        raise ValueError(f"rate must be finite and positive, got {rate}")
    return [round(n * 1_000_000_000 / rate) for n in range(requests)]
