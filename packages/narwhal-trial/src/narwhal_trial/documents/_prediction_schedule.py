"""The parts of the ``predict`` document a ``--workload`` adds, and their text lines.

A runbook prediction's document holds none of them (each field is left out when empty), so it stays
what it always was. ``--workload FILE`` records the file (``Inputs.workload``); a scheduled one's
predictions say their speedup and the predicted attainment per power-of-two input-length bucket
(the edges of ``summary.json`` ``schedule.buckets``: ``[1, 512)``, ``[512, 1024)``, ...).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from narwhal_trial.documents._records import AliasedDoc


def _absent(value: object) -> bool:
    return value is None


def omitted_when_none(description: str) -> Any:
    """A field that defaults to None and is left out of the document while it is None."""
    return Field(default=None, exclude_if=_absent, description=description)


class PredictedWorkload(AliasedDoc):
    """``--workload FILE``: where the shape came from."""

    path: str
    sha256: str = Field(description="SHA-256 of the file's exact bytes (as a run's manifest has)")
    source: Literal["runbook", "trace", "synthetic"] = Field(
        description="runbook: no schedule (--requests offers of its input/output tokens at "
        "--rate); trace or synthetic: where its schedule came from"
    )
    requests: int | None = Field(description="the schedule's requests (null: the runbook's)")
    span_s: float | None = Field(
        description="first to last due time at the workload's own pace (null: the runbook's)"
    )
    speedup: float | None = Field(
        description="--speedup (1 when not given): the time axis divided by it; null for the "
        "runbook's"
    )
    mean_rate: float | None = Field(
        description="the schedule's mean requests per second at that speedup, (n - 1) / span"
    )


class PredictedBucket(AliasedDoc):
    """Requests whose input length is in ``[low, high)``, and how many are predicted good."""

    low: int
    high: int
    requests: int
    good: int = Field(description="the median over replications (counted as the trial's)")
    attainment: float = Field(description="good / requests")
    low_attainment: float = Field(
        description="as the prediction's attainment_interval: the 5th percentile over the "
        "replications, or (one) with every fit slower by its worst residual"
    )
    high_attainment: float


def workload_lines(w: PredictedWorkload) -> list[str]:
    """One line about the workload file."""
    if w.source == "runbook":
        return [f"workload {w.path}: the runbook's (no schedule)"]
    span = "" if w.span_s is None else f" over {w.span_s:.4g} s at its own pace"
    at = (
        ""
        if w.speedup is None or w.mean_rate is None
        else f"; speedup {w.speedup:g}x: mean {w.mean_rate:.4g}/s"
    )
    return [f"workload {w.path}: {w.source}, {w.requests} requests{span}{at}"]


def bucket_lines(buckets: list[PredictedBucket]) -> list[str]:
    """One line per input-length bucket."""
    return [
        f"  input [{b.low}, {b.high}): {b.good}/{b.requests} good, attainment "
        f"{b.attainment:.3f} [{b.low_attainment:.3f}, {b.high_attainment:.3f}]"
        for b in buckets
    ]


def pace_label(rate: float, speedup: float | None) -> str:
    """``rate 2/s``, or a scheduled prediction's ``speedup 2x (mean 3.1/s)``."""
    if speedup is None:
        return f"rate {rate:g}/s"
    return f"speedup {speedup:g}x (mean {rate:.4g}/s)"
