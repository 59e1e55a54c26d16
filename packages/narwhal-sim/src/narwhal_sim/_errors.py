"""The simulator's exception tree."""

from __future__ import annotations


class SimError(Exception):
    """Root of every narwhal-sim error."""


class SimConfigError(SimError):
    """A fleet file, sim config or option value the simulator cannot use."""


class SimStartError(SimError):
    """A simulated fleet did not come up (port in use, subprocess died, readiness timeout)."""
