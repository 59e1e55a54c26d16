"""The simulator's exception tree."""

from __future__ import annotations


class SimError(Exception):
    """Root of every narwhal-sim error; ``exit_code`` is what the command exits with."""

    exit_code = 1


class SimConfigError(SimError):
    """A fleet file, sim config or option value the simulator cannot use."""

    exit_code = 2


class SimStartError(SimError):
    """A simulated fleet did not come up (port in use, subprocess died, readiness timeout)."""
