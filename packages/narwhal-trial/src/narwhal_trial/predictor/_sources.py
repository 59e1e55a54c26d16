"""Each source of spread's share of a predicted rate's 5-95 % attainment range (docs/design.md
§11, "Sources of spread").

Each simulated source (``engine_speed``, ``fits_bootstrap``, ``request_noise``) is measured one
at a time: the rate's replications (the same count and seed) run again with that source alone
drawn and the others at their centre, and its width is their 95th less their 5th percentile good
count (nearest rank, as the range), over the requests. ``trial_sampling`` is not simulated: the
exact binomial width of a trial of that many requests at the median attainment. The widths do not
add up to the range's: the sources act together through the bounds and the queue.
"""

from __future__ import annotations

from narwhal_trial._stats import binomial_width
from narwhal_trial.documents._prediction_spread import SpreadSources
from narwhal_trial.predictor._buckets import good_flags, nearest_rank
from narwhal_trial.predictor._model import FleetModel, TrialTarget
from narwhal_trial.predictor._spread import Source
from narwhal_trial.predictor._vtime import TrialShape, simulate


def source_goods(
    model: FleetModel,
    shape: TrialShape,
    target: TrialTarget,
    rate: float,
    replications: int,
    seed: int,
    source: Source,
) -> list[int]:
    """The good count of each replication at ``rate`` with only ``source`` drawn, sorted."""
    return sorted(
        sum(good_flags(simulate(model.engines, shape, rate, replica), target))
        for replica in model.replicas(seed, replications, frozenset({source}))
    )


def spread_sources(
    model: FleetModel,
    shape: TrialShape,
    target: TrialTarget,
    rate: float,
    replications: int,
    seed: int,
    good: int,
) -> SpreadSources:
    """Each source's width at ``rate`` (0 without anything to draw: no run), and the binomial
    width of a trial of the shape's requests at the median ``good``."""
    n = shape.requests

    def width(source: Source) -> float:
        if not model.spread.varies(source):
            return 0.0
        goods = source_goods(model, shape, target, rate, replications, seed, source)
        return (nearest_rank(goods, 0.95) - nearest_rank(goods, 0.05)) / n

    return SpreadSources(
        engine_speed=width("engine_speed"),
        fits_bootstrap=width("fits_bootstrap"),
        request_noise=width("request_noise"),
        trial_sampling=binomial_width(n, good / n),
        requests=n,
        speed_from=model.spread.speed_from,
    )
