"""``summary.json``: the verdict, its exact threshold, and the measures behind it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal

from narwhal_trial._interval import Interval
from narwhal_trial._stats import distribution, required_good, wilson_interval
from narwhal_trial.documents._records import (
    STATUSES,
    ClientUsage,
    Distribution,
    RequestRecord,
    Summary,
)


@dataclass(slots=True)
class RunFacts:
    """What the run loop knows besides the records: limits, maxima, resources, how it ended."""

    run_id: str
    requests: int
    rate: float
    attainment: Decimal
    max_lag_s: float
    max_in_flight_seen: int = 0
    cpu_user_s: float = 0.0
    cpu_system_s: float = 0.0
    peak_rss_bytes: int = 0
    loop_lag_s: list[float] = field(default_factory=list)
    preconnected: int = 0
    warmup_status: str | None = None
    drain_s: list[float] = field(default_factory=list)
    interrupted: bool = False
    error: str | None = None


def exit_code(*, interrupted: bool, error: str | None, passed: bool, valid: bool) -> int:
    """The runbook's table: 130 interrupted, 1 blocking error, 0 pass and valid, else 2."""
    if interrupted:
        return 130
    if error is not None:
        return 1
    return 0 if passed and valid else 2


def _dist(values: Sequence[float]) -> Distribution:
    return Distribution.model_validate(distribution(values))


def summarize(records: Sequence[RequestRecord], facts: RunFacts) -> Summary:
    """Build the summary from every record written and the run's facts."""
    counts = Counter(r.status for r in records)
    sent = [r for r in records if r.sent]
    completed = [r for r in records if r.status == "completed"]
    misses = Counter(r.miss_reason for r in records if r.status == "client_schedule_miss")
    good = sum(1 for r in records if r.good)
    need = required_good(facts.attainment, facts.requests)
    low, high = wilson_interval(good, facts.requests)
    lags = [r.lag_s for r in sent]
    max_lag = max(lags) if lags else None
    # A run that stopped (blocking error, interrupt) before its first offer judged nothing: no
    # schedule was kept to be proven valid and no request could pass.
    judged = bool(records) or (facts.error is None and not facts.interrupted)
    valid = judged and not misses and (max_lag is None or max_lag <= facts.max_lag_s)
    passed = judged and good >= need
    sent_times = sorted(r.sent_s for r in sent if r.sent_s is not None)
    achieved = (
        (len(sent_times) - 1) / (sent_times[-1] - sent_times[0])
        if len(sent_times) >= 2 and sent_times[-1] > sent_times[0]
        else None
    )
    ends = [r.end_s for r in records if r.end_s is not None]
    cpu = facts.cpu_user_s + facts.cpu_system_s
    return Summary.model_validate(
        {
            "run_id": facts.run_id,
            "requests": facts.requests,
            "offered": len(records),
            "sent": len(sent),
            "counts": {status: counts.get(status, 0) for status in STATUSES},
            "good": good,
            "required_good": need,
            "attainment": good / facts.requests,
            "attainment_target": str(facts.attainment),
            "attainment_interval": Interval(low=low, high=high),
            "pass": passed,
            "client_schedule_valid": valid,
            "schedule_misses": {
                "in_flight_cap": misses.get("in_flight_cap", 0),
                "lag": misses.get("lag", 0),
            },
            "max_lag_s": max_lag,
            "max_in_flight": facts.max_in_flight_seen,
            "ttft_s": _dist([r.ttft_s for r in completed if r.ttft_s is not None]),
            "tpot_s": _dist([r.tpot_s for r in completed if r.tpot_s is not None]),
            "e2e_s": _dist([r.e2e_s for r in completed if r.e2e_s is not None]),
            "offered_rate": facts.rate,
            "achieved_rate": achieved,
            "duration_s": max(ends) if ends else None,
            "client": ClientUsage(
                cpu_user_s=facts.cpu_user_s,
                cpu_system_s=facts.cpu_system_s,
                cpu_per_sent_request_s=cpu / len(sent) if sent else None,
                peak_rss_bytes=facts.peak_rss_bytes,
                bytes_sent=sum(r.bytes_sent for r in records),
                bytes_received=sum(r.bytes_received for r in records),
                event_loop_lag_s=_dist(facts.loop_lag_s),
                scheduling_lag_s=_dist(lags),
                preconnected=facts.preconnected,
                resends=sum(r.resends for r in records),
            ),
            "warmup_status": facts.warmup_status,
            "drain_s": facts.drain_s,
            "exit_code": exit_code(
                interrupted=facts.interrupted, error=facts.error, passed=passed, valid=valid
            ),
            "interrupted": facts.interrupted,
            "error": facts.error,
        }
    )
