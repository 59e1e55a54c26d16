"""The confidence interval the run's documents give a proportion."""

from __future__ import annotations

from typing import Literal

from narwhal_store import ClosedModel


class Interval(ClosedModel):
    """A two-sided confidence interval of a proportion."""

    method: Literal["wilson"] = "wilson"
    confidence: float = 0.95
    low: float
    high: float
