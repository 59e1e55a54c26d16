"""``run``'s timing of a workload: the runbook's ``--rate``/``--requests``, or a scheduled
workload's own due times scaled by ``--speedup``.

A scheduled workload (``prepare --trace`` or ``--arrivals``) holds its requests and their due
times, so ``--rate`` and ``--requests`` are refused beside it (the message says to use
``--speedup``); the runbook's workload has none, so ``--speedup`` is refused for it and
``--rate`` and ``--requests`` are needed. The run's ``rate`` is then the schedule's mean rate at
that speedup (what the manifest, the progress line and ``offered_rate`` report).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from narwhal_trial._errors import TrialUsageError, WorkloadError
from narwhal_trial.run._settings import RunSettings
from narwhal_trial.workload._file import Workload, load_workload
from narwhal_trial.workload._schedule import check_speedup, speedup_refusal


@dataclass(frozen=True, slots=True)
class RunTiming:
    """What the run offers: how many requests, at what (mean) rate, at what speedup."""

    rate: float
    requests: int
    speedup: float | None
    """None for the runbook's workload (no schedule)."""
    base_rate: float | None = None
    """A scheduled workload's mean rate at speedup 1 (``edge`` scales it by each speedup)."""
    span_s: float = 0.0
    """A scheduled workload's span at speedup 1."""


def timing_of(
    workload: Workload,
    label: str,
    *,
    rate: float | None,
    requests: int | None,
    speedup: float | None,
    rate_flag: str = "--rate",
    speedup_flag: str = "--speedup",
    default_rate: float | None = None,
) -> RunTiming:
    """The timing of ``workload`` (read from ``label``) under the given flags (``default_rate``:
    the runbook's rate when ``rate_flag`` is not given); TrialUsageError naming the flag for a
    combination that does not apply (see the module's docstring)."""
    sched = workload.schedule
    if sched is None:
        if speedup is not None:
            raise speedup_refusal(speedup_flag, label, f"run at {rate_flag} with --requests")
        rate = default_rate if rate is None else rate
        if rate is None or requests is None:
            missing = " and ".join(
                f for f, v in ((rate_flag, rate), ("--requests", requests)) if v is None
            )
            raise TrialUsageError(f"{label} is the runbook's workload: give {missing}")
        return RunTiming(rate=rate, requests=requests, speedup=None)
    given = [f for f, v in ((rate_flag, rate), ("--requests", requests)) if v is not None]
    if given:
        raise TrialUsageError(
            f"{' and '.join(given)} cannot be used with {label}: its {sched.requests} requests "
            f"keep their own due times ({sched.source.kind}); use {speedup_flag} X to scale its "
            "time axis"
        )
    factor = 1.0 if speedup is None else speedup
    check_speedup(factor)
    return RunTiming(
        rate=sched.mean_rate(factor),
        requests=sched.requests,
        speedup=factor,
        base_rate=sched.mean_rate(),
        span_s=sched.span_s,
    )


def run_timing(
    path: Path,
    *,
    rate: float | None,
    requests: int | None,
    speedup: float | None,
    rate_flag: str = "--rate",
    speedup_flag: str = "--speedup",
    default_rate: float | None = None,
) -> RunTiming:
    """``timing_of`` the workload file at ``path`` (``run``'s flags, or ``edge``'s
    ``--start-rate``/``--start-speedup``). A file that cannot be read or used is left to the
    command, which reads it again after checking its settings (so a bad ``--base`` is named
    first, as always): the flags are then taken as given."""
    try:
        workload = load_workload(path).workload
    except WorkloadError:
        given = default_rate if rate is None else rate
        return RunTiming(
            rate=1.0 if given is None else given,
            requests=1 if requests is None else requests,
            speedup=speedup,
        )
    return timing_of(
        workload,
        f"workload {path}",
        rate=rate,
        requests=requests,
        speedup=speedup,
        rate_flag=rate_flag,
        speedup_flag=speedup_flag,
        default_rate=default_rate,
    )


def check_timing(workload: Workload, label: str, settings: RunSettings) -> None:
    """TrialUsageError unless ``settings`` time ``workload`` as ``timing_of`` would: a speedup
    and the schedule's request count for a scheduled workload, no speedup for the runbook's."""
    sched = workload.schedule
    if sched is None:
        if settings.speedup is not None:
            raise speedup_refusal("--speedup", label, "run at --rate with --requests")
        return
    if settings.speedup is None or settings.requests != sched.requests:
        raise TrialUsageError(
            f"{label} holds {sched.requests} scheduled requests: run it with --speedup "
            f"(asked: {settings.requests} requests, speedup {settings.speedup})"
        )
