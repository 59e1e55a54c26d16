"""A scheduled workload's predicted attainment per input-length bucket.

The buckets are ``summary.json``'s (``_schedule_view.edges_for``: ``[1, 512)``, ``[512, 1024)``,
``[1024, 2048)``, ...; only those holding a request), so a prediction and the run it predicts
compare bucket by bucket. A request is good as the trial judges it: sent, TTFT within the bound
and TPOT (over its own output tokens) within the bound; a schedule miss is never good.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from narwhal_trial.documents._prediction_schedule import PredictedBucket
from narwhal_trial.predictor._model import TrialTarget
from narwhal_trial.predictor._vtime import SimulatedOutcome
from narwhal_trial.run._schedule_view import bucket_index, edges_for


def nearest_rank(values: Sequence[int], q: float) -> int:
    """The nearest-rank ``q`` quantile of sorted ``values``."""
    return values[max(0, math.ceil(q * len(values)) - 1)]


def good_flags(outcome: SimulatedOutcome, target: TrialTarget) -> list[bool]:
    """For each sent request of ``outcome`` (in ``outcome.ttft`` order), whether it meets both
    bounds."""
    ttft, tpot = float(target.ttft_s), float(target.tpot_s)
    return [a <= ttft and b <= tpot for a, b in zip(outcome.ttft, outcome.tpot, strict=True)]


def good_requests(outcome: SimulatedOutcome, target: TrialTarget) -> set[int]:
    """The requests of ``outcome`` that meet both bounds."""
    return {k for k, ok in zip(outcome.sent, good_flags(outcome, target), strict=True) if ok}


def _counts(bucket_of: list[int], good: set[int], size: int) -> list[int]:
    counts = [0] * size
    for k in good:
        counts[bucket_of[k]] += 1
    return counts


def predicted_buckets(
    inputs: Sequence[int],
    runs: list[set[int]],
    ends: tuple[set[int], set[int]] | None = None,
) -> list[PredictedBucket]:
    """Per bucket of ``inputs`` (each request's prompt tokens), the good requests of ``runs``
    (each run's good request indices): one run with ``ends`` (the good requests with every fit
    slower, and faster, by its worst residual) gives the fit-residual range; more runs the median
    and the 5th and 95th percentile over them."""
    edges = edges_for(max(inputs))
    size = len(edges) - 1
    bucket_of = [bucket_index(edges, n) for n in inputs]
    requests = [0] * size
    for b in bucket_of:
        requests[b] += 1
    per_run = [_counts(bucket_of, good, size) for good in runs]
    slow, fast = (
        (per_run[0], per_run[0])
        if ends is None
        else (
            _counts(bucket_of, ends[0], size),
            _counts(bucket_of, ends[1], size),
        )
    )
    out = []
    for i in range(size):
        n = requests[i]
        if not n:
            continue
        goods = sorted(c[i] for c in per_run)
        if len(goods) == 1:
            good = goods[0]
            low, high = min(slow[i], good), max(fast[i], good)
        else:
            good = nearest_rank(goods, 0.5)
            low, high = nearest_rank(goods, 0.05), nearest_rank(goods, 0.95)
        out.append(
            PredictedBucket(
                low=edges[i],
                high=edges[i + 1],
                requests=n,
                good=good,
                attainment=good / n,
                low_attainment=low / n,
                high_attainment=high / n,
            )
        )
    return out
