"""The part of the ``predict`` document that says where a Monte Carlo range's width comes from
(``RatePrediction.spread_sources``), and its text line.

Left out with one replication and with a bounded miss, so such documents stay what they were.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from narwhal_trial.documents._records import AliasedDoc


class SpreadSources(AliasedDoc):
    """Each source of spread's share of the 5-95 % attainment range (docs/design.md §11): the
    range's width (high - low, in attainment) with that source alone varying over the same
    replications and the others at their centre. The widths do not add up to the range's."""

    engine_speed: float = Field(
        description="the whole engine's speed, one draw per replication (speed_from says whence)"
    )
    fits_bootstrap: float = Field(
        description="the resampling of the profiled levels and noise pools: the fits' uncertainty"
    )
    request_noise: float = Field(
        description="the requests' own TTFT and TPOT noise draws: the trial's sampling of its "
        "requests from the noise"
    )
    trial_sampling: float = Field(
        description="not simulated: the exact 5-95 % width of Binomial(requests, attainment) / "
        "requests, which a trial has even against a perfectly known engine"
    )
    requests: int = Field(description="the trial's requests behind trial_sampling")
    speed_from: Literal["sweep", "probe"] = Field(
        description="sweep: each engine's speed is a moment of its profile's sweep; probe: some "
        "engine's comes from a freshness probe's factors"
    )


def spread_line(s: SpreadSources) -> str:
    """One line: each source's width."""
    return (
        f"  spread (5-95 % width) from: engine speed {s.engine_speed:.3f} ({s.speed_from}), "
        f"fits {s.fits_bootstrap:.3f}, request noise {s.request_noise:.3f}, trial of "
        f"{s.requests} requests {s.trial_sampling:.3f}"
    )
