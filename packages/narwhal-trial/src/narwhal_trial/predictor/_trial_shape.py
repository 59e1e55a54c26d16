"""The trial's shape as ``predict`` simulates it: the runbook's constant one, or a scheduled
workload's own arrivals and lengths (``_vtime.simulate`` runs it)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from narwhal_trial._limits import DEFAULT_MAX_IN_FLIGHT
from narwhal_trial.workload._schedule import mean_rate_of


@dataclass(frozen=True, slots=True)
class TrialShape:
    """The trial's shape and the two settings no profile holds.

    The runbook's trial: ``requests`` offers of ``input_tokens``/``output_tokens`` at ``k / rate``.
    A scheduled workload's (``offsets_s``, ``inputs`` and ``outputs`` given, one entry a request):
    request ``k`` is due ``offsets_s[k] / speedup`` seconds after the first and has its own
    lengths; ``input_tokens``/``output_tokens`` are then its longest request's (as the workload
    file has them) and ``requests`` the entries' count.
    """

    input_tokens: int
    output_tokens: int
    requests: int
    kv_transfer_s_per_token: float = 0.0
    # every engine's per-step budget, over the profiles' (None: each engine's own); applied when
    # the fleet model is built (``_model.fleet_model``): ``simulate`` takes each EngineModel's
    max_num_batched_tokens: int | None = None
    # the client's cap: an offer due beyond it is never sent
    max_in_flight: int | None = DEFAULT_MAX_IN_FLIGHT
    # a scheduled workload's due offsets at its own pace (seconds, the first 0, non-decreasing)
    # and per-request lengths; None: the runbook's constant shape
    offsets_s: tuple[float, ...] | None = None
    inputs: tuple[int, ...] | None = None
    outputs: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        columns = (self.offsets_s, self.inputs, self.outputs)
        if all(c is None for c in columns):
            return
        if any(c is None or len(c) != self.requests for c in columns):
            raise ValueError(
                f"a scheduled shape needs offsets_s, inputs and outputs of {self.requests} "
                "entries each"
            )

    @property
    def scheduled(self) -> bool:
        """True for a scheduled workload's shape (its own arrivals and lengths)."""
        return self.offsets_s is not None

    def arrivals(self, pace: float) -> list[float]:
        """Each offer's due time (seconds): ``k / pace`` (``pace`` the rate), or a scheduled
        shape's ``offsets_s[k] / pace`` (``pace`` the speedup)."""
        if self.offsets_s is None:
            return [k / pace for k in range(self.requests)]
        return [t / pace for t in self.offsets_s]

    def mean_rate(self, pace: float) -> float:
        """Offered requests per second: the rate itself, or a scheduled shape's mean at speedup
        ``pace``, (n - 1) / span (n a second when the span is 0, as ``Schedule.mean_rate``)."""
        if self.offsets_s is None:
            return pace
        return mean_rate_of(self.requests, self.offsets_s[-1] / pace)

    def input_lengths(self) -> list[int]:
        """Each request's prompt tokens."""
        return [self.input_tokens] * self.requests if self.inputs is None else list(self.inputs)

    def output_lengths(self) -> list[int]:
        """Each request's output tokens."""
        return [self.output_tokens] * self.requests if self.outputs is None else list(self.outputs)

    def without_schedule(self) -> TrialShape:
        """The constant shape of the same lengths, count and settings (no per-request columns)."""
        return dataclasses.replace(self, offsets_s=None, inputs=None, outputs=None)
