"""Non-negative least squares on relative error (weights 1/y), shared by every form."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

from narwhal_fit._errors import FitConvergenceError

__all__ = ["METHOD", "WEIGHTS", "nnls_relative"]

WEIGHTS: Final = "1/y"
"""Weighting recorded in every fit document: each residual is divided by the observed value."""

METHOD: Final = "nnls"
"""Solver recorded in every fit document."""


def nnls_relative(
    design: NDArray[np.float64],
    y: NDArray[np.float64],
    scale: NDArray[np.float64] | None = None,
) -> NDArray[np.float64]:
    """Return ``beta >= 0`` minimising ``sum(((design @ beta - y) / scale) ** 2)``.

    ``scale`` defaults to ``y`` (relative error); a form whose observations may be zero or
    negative passes its own positive scale (the mixing form: ``max(y, floor)``). Rows are divided
    by ``scale`` and each column is then scaled to unit norm so the solver sees a well-conditioned
    matrix whatever the units (``L`` and ``L**2`` differ by 10**4). A column that is identically
    zero gets coefficient 0. ``y`` must be finite and ``scale`` finite and positive (callers
    check). The Lawson-Hanson active-set solver is deterministic.
    """
    import numpy as np  # deferred: numpy loads with the first fit, not with the package
    from scipy.optimize import nnls  # deferred: scipy.optimize takes 0.3-1 s to import

    divisor = y if scale is None else scale
    weighted = design / divisor[:, np.newaxis]
    norms = np.linalg.norm(weighted, axis=0)
    active = norms > 0.0
    scaled = weighted[:, active] / norms[active]
    # scipy is imported here, not with the module: it costs ~1 s of start-up that every command
    # importing narwhal_fit (narwhal-profile, also for a usage error) would pay before any fit

    try:
        solution, _ = nnls(scaled, y / divisor, maxiter=100 * design.shape[1])
    except RuntimeError as exc:
        raise FitConvergenceError(f"non-negative least squares did not converge: {exc}") from exc
    beta = np.zeros(design.shape[1], dtype=np.float64)
    beta[active] = np.asarray(solution, dtype=np.float64) / norms[active]
    if not np.all(np.isfinite(beta)):
        raise FitConvergenceError(f"non-negative least squares gave non-finite coefficients {beta}")
    return np.maximum(beta, 0.0)
