"""``edge``'s settings: the run's settings every trial shares, the search's, and the predictor's
(``--fleet``/``--profiles``); validated before anything is touched."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from narwhal_trial._errors import TrialUsageError
from narwhal_trial._limits import MAX_RATE, MAX_SCHEDULE_S
from narwhal_trial.predictor._predict import DEFAULT_REPLICATIONS
from narwhal_trial.run._settings import RunSettings
from narwhal_trial.workload._schedule import MAX_SPEEDUP

MAX_TRIALS = 1000
MAX_REPEATS = 10
MIN_TOLERANCE, MAX_TOLERANCE = 0.01, 1.0
MIN_RATE = 1e-6


@dataclass(frozen=True, slots=True)
class BandSettings:
    """``--fleet``, ``--profiles`` and the predictor's settings: start from its band."""

    fleet: Path
    profiles: Path
    limits: Path | None = None
    kv_transfer_s_per_token: float = 0.0
    max_num_batched_tokens: int | None = None  # None: each engine's, from its profile
    replications: int = DEFAULT_REPLICATIONS
    seed: int = 0


@dataclass(frozen=True, slots=True)
class EdgeSettings:
    """Everything ``edge`` was asked. ``run`` is every trial's settings but ``rate`` and ``out``."""

    run: RunSettings
    out: Path
    tolerance: float = 0.05
    max_trials: int = 8
    max_repeats: int = 2
    start_rate: float = 1.0
    """The first rate, or a scheduled workload's first speedup (``--start-speedup``)."""
    predict: BandSettings | None = None
    schedule_rate: float | None = None
    """A scheduled workload's mean rate at speedup 1: the search varies the speedup (None: the
    runbook's workload, the rate)."""
    schedule_span_s: float = 0.0
    """A scheduled workload's span at speedup 1."""

    @property
    def searched(self) -> Literal["rate", "speedup"]:
        return "rate" if self.schedule_rate is None else "speedup"

    def validate(self) -> None:
        """TrialUsageError (exit 1, nothing touched) for a value the search cannot use."""
        checks = [
            (
                math.isfinite(self.tolerance) and MIN_TOLERANCE <= self.tolerance <= MAX_TOLERANCE,
                f"--tolerance must be from {MIN_TOLERANCE:g} to {MAX_TOLERANCE:g} (a fraction: "
                f"0.05 is 5 %), got {self.tolerance:g}",
            ),
            (
                2 <= self.max_trials <= MAX_TRIALS,
                f"--max-trials must be from 2 to {MAX_TRIALS}, got {self.max_trials}",
            ),
            (
                0 <= self.max_repeats <= MAX_REPEATS,
                f"--max-repeats must be from 0 to {MAX_REPEATS}, got {self.max_repeats}",
            ),
        ]
        if self.schedule_rate is None:
            checks += [
                (
                    math.isfinite(self.start_rate) and 0 < self.start_rate <= MAX_RATE,
                    f"--start-rate must be positive and at most {MAX_RATE:g} per second, got "
                    f"{self.start_rate:g}",
                ),
                (
                    not self.start_rate > 0 or self.start_rate >= self.min_rate,
                    f"--requests {self.run.requests} at --start-rate {self.start_rate:g} would "
                    f"offer for more than {MAX_SCHEDULE_S:.0f} s (a day)",
                ),
            ]
        else:
            checks += [
                (
                    math.isfinite(self.start_rate) and self.min_rate <= self.start_rate,
                    f"--start-speedup {self.start_rate:g} must be at least {self.min_rate:g} (the "
                    f"schedule must end within {MAX_SCHEDULE_S:.0f} s)",
                ),
                (
                    self.start_rate <= self.max_rate,
                    f"--start-speedup must be at most {self.max_rate:g} (a speedup of "
                    f"{MAX_SPEEDUP:g} at most, a mean rate of {MAX_RATE:g}/s at most), got "
                    f"{self.start_rate:g}",
                ),
                (
                    self.predict is None,
                    "--fleet and --profiles (the predicted band) start the search of the "
                    "runbook's workload; a scheduled workload's starts from --start-speedup",
                ),
            ]
        p = self.predict
        if p is not None:
            checks += [
                (
                    math.isfinite(p.kv_transfer_s_per_token) and p.kv_transfer_s_per_token >= 0,
                    "--kv-transfer-s-per-token must be a non-negative number, got "
                    f"{p.kv_transfer_s_per_token:g}",
                ),
                (
                    p.max_num_batched_tokens is None or p.max_num_batched_tokens >= 1,
                    f"--max-num-batched-tokens must be at least 1, got {p.max_num_batched_tokens}",
                ),
                (p.seed >= 0, f"--seed must be at least 0, got {p.seed}"),
            ]
        for ok, message in checks:
            if not ok:
                raise TrialUsageError(message)
        self.trial(0, self.start_rate).validate()

    @property
    def min_rate(self) -> float:
        """The lowest rate whose schedule still ends within a day (``run``'s bound), and never
        below one request in a million seconds; for a scheduled workload, the lowest speedup."""
        if self.schedule_rate is not None:
            return max(self.schedule_span_s / MAX_SCHEDULE_S, MIN_RATE)
        return max((self.run.requests - 1) / MAX_SCHEDULE_S, MIN_RATE)

    @property
    def max_rate(self) -> float:
        """``run``'s highest rate; for a scheduled workload, the highest speedup (whose mean
        rate stays within it)."""
        if self.schedule_rate is None:
            return MAX_RATE
        return min(MAX_SPEEDUP, MAX_RATE / self.schedule_rate)

    def trial(self, index: int, value: float) -> RunSettings:
        """The settings of trial ``index`` at ``value`` (a rate, or a scheduled workload's
        speedup): a run folder of its own under ``out``."""
        out = self.out / trial_folder(index, value, self.searched)
        if self.schedule_rate is None:
            return dataclasses.replace(self.run, rate=value, out=out)
        return dataclasses.replace(
            self.run, rate=self.schedule_rate * value, speedup=value, out=out
        )


def trial_folder(index: int, value: float, searched: str = "rate") -> str:
    """``trial-01-rate-7.5`` (or ``trial-01-speedup-2``): the run folder of trial ``index``
    (from 1) at ``value``."""
    return f"trial-{index:02d}-{searched}-{value:g}"


def predict_options(
    fleet: Path | None,
    profiles: Path | None,
    *,
    limits: Path | None = None,
    kv_transfer_s_per_token: float | None = None,
    max_num_batched_tokens: int | None = None,
    replications: int | None = None,
    seed: int | None = None,
) -> BandSettings | None:
    """The predictor's options, or None without ``--fleet`` and ``--profiles``. The two come
    together, and the others (None: not given) only with them; TrialUsageError otherwise."""
    others = {
        "--limits": limits,
        "--kv-transfer-s-per-token": kv_transfer_s_per_token,
        "--max-num-batched-tokens": max_num_batched_tokens,
        "--replications": replications,
        "--seed": seed,
    }
    given = [flag for flag, value in others.items() if value is not None]
    if fleet is None and profiles is None:
        if given:
            raise TrialUsageError(f"{given[0]} needs --fleet and --profiles (the predicted band)")
        return None
    if fleet is None or profiles is None:
        have, need = ("--profiles", "--fleet") if fleet is None else ("--fleet", "--profiles")
        raise TrialUsageError(f"{have} needs {need}: the band is predicted from both")
    return BandSettings(
        fleet,
        profiles,
        limits,
        0.0 if kv_transfer_s_per_token is None else kv_transfer_s_per_token,
        max_num_batched_tokens,
        DEFAULT_REPLICATIONS if replications is None else replications,
        0 if seed is None else seed,
    )
