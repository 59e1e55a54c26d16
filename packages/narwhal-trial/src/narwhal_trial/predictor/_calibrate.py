"""``predict --calibrate RUN``: one measured trial of the same fleet against the prediction at its
own rate, and the correction that makes them agree (docs/design.md §13).

The prediction at the run's rate, shape and request count (over the same replications of the
profiles' spread as the prediction) is compared with what the run measured: the median TTFT and
TPOT of its completed requests. The correction is one factor on every engine's prefill fit
(``a``, ``b``, ``c``) and one on its decode fit (``d0``, ``d1``, ``d2`` and the mixing's
``step_s``), found by fixed-point iteration so that the corrected prediction's medians equal the
measured ones at that rate: the engine as it ran then, against the engine the profile measured.
It is reported always and applied only with ``--apply-calibration``; the prediction then says so.
This is the observed-against-expected correction a run-time planner applies, made visible.
"""

from __future__ import annotations

import dataclasses
import statistics
from dataclasses import dataclass
from pathlib import Path

from narwhal_trial._errors import ReadError, TrialUsageError
from narwhal_trial.documents._runfolder import TrialRun, read_run
from narwhal_trial.predictor._model import FleetModel, scale_fits
from narwhal_trial.predictor._vtime import EngineModel, TrialShape, simulate

#: Completed requests a run needs before its medians mean anything.
MIN_COMPLETED = 10
#: Factors beyond this range mean another fleet (or a broken run), not a drift: refused.
FACTOR_RANGE = (0.2, 5.0)
_ROUNDS = 12
_CONVERGED = 1e-3


@dataclass(frozen=True, slots=True)
class Calibration:
    """What the run measured, what the profiles predicted for it, and the correction."""

    run: str
    rate: float
    requests: int
    input_tokens: int
    output_tokens: int
    measured_ttft_p50: float
    measured_tpot_p50: float
    predicted_ttft_p50: float
    predicted_tpot_p50: float
    prefill_factor: float
    decode_factor: float
    applied: bool


def scale_engines(engines: list[EngineModel], prefill: float, decode: float) -> list[EngineModel]:
    """Every engine's prefill fit times ``prefill``, decode fit (and mixing step) times
    ``decode``."""
    return [scale_fits(m, prefill, decode) for m in engines]


def _read(path: str) -> TrialRun:
    try:
        return read_run(Path(path))
    except ReadError as exc:
        raise TrialUsageError(f"--calibrate {path}: {exc}") from exc


def _medians(
    model: FleetModel,
    engines: list[EngineModel],
    shape: TrialShape,
    rate: float,
    replications: int,
    seed: int,
) -> tuple[float, float]:
    """The median TTFT and TPOT over every replication's requests (as ``predict`` reports)."""
    ttft: list[float] = []
    tpot: list[float] = []
    replicas = model.replicas(seed, replications) if replications > 1 else [None]
    for replica in replicas:
        out = simulate(engines, shape, rate, replica)
        ttft += out.ttft
        tpot += out.tpot
    if not ttft:
        return 0.0, 0.0
    return statistics.median(ttft), statistics.median(tpot)


def calibrate(
    model: FleetModel,
    path: str,
    shape: TrialShape,
    *,
    apply: bool,
    replications: int = 1,
    seed: int = 0,
) -> tuple[FleetModel, Calibration]:
    """Read run ``path``, compare, and return the model (corrected when ``apply``) and the
    calibration. ``shape`` gives the settings no run records (the KV transfer, the budget
    override); the run gives its own tokens, request count and in-flight cap. The prediction's
    medians are over ``replications`` of the profiles' spread (as ``predict`` runs them): at a
    loaded rate the spread makes requests overlap that the fits alone keep apart, and a
    correction of the fits alone would charge that overlap to the engine's speed."""
    run = _read(path)
    summary, manifest = run.summary, run.manifest
    if not summary.client_schedule_valid:
        raise TrialUsageError(
            f"--calibrate {path}: the run's client did not keep its schedule "
            "(client_schedule_valid false), so its timings describe the client, not the fleet"
        )
    done = [r for r in run.records if r.status == "completed" and r.ttft_s is not None]
    if len(done) < MIN_COMPLETED:
        raise TrialUsageError(
            f"--calibrate {path}: {len(done)} completed request(s), at least {MIN_COMPLETED} "
            "are needed"
        )
    ttft = statistics.median(r.ttft_s for r in done if r.ttft_s is not None)
    tpot = statistics.median(r.tpot_s or 0.0 for r in done)
    run_shape = dataclasses.replace(
        shape,
        input_tokens=manifest.input_tokens,
        output_tokens=manifest.output_tokens,
        requests=manifest.requests,
        max_in_flight=summary.max_in_flight,
    )
    base = model.engines
    p_ttft, p_tpot = _medians(model, base, run_shape, manifest.rate, replications, seed)
    if p_ttft <= 0 or (manifest.output_tokens > 1 and p_tpot <= 0):
        raise TrialUsageError(f"--calibrate {path}: the prediction at its rate sends nothing")
    fp = fd = 1.0
    for _ in range(_ROUNDS):
        c_ttft, c_tpot = _medians(
            model, scale_engines(base, fp, fd), run_shape, manifest.rate, replications, seed
        )
        step_p = ttft / c_ttft if c_ttft > 0 else 1.0
        step_d = tpot / c_tpot if c_tpot > 0 else 1.0
        fp, fd = fp * step_p, fd * step_d
        if abs(step_p - 1) < _CONVERGED and abs(step_d - 1) < _CONVERGED:
            break
    low, high = FACTOR_RANGE
    if not (low <= fp <= high and low <= fd <= high):
        raise TrialUsageError(
            f"--calibrate {path}: the run is {fp:.2f} times the profiles' prefill and {fd:.2f} "
            f"times their decode, outside {low:g}-{high:g}: another fleet or model, not a drift"
        )
    calibration = Calibration(
        run=path,
        rate=manifest.rate,
        requests=manifest.requests,
        input_tokens=manifest.input_tokens,
        output_tokens=manifest.output_tokens,
        measured_ttft_p50=ttft,
        measured_tpot_p50=tpot,
        predicted_ttft_p50=p_ttft,
        predicted_tpot_p50=p_tpot,
        prefill_factor=fp,
        decode_factor=fd,
        applied=apply,
    )
    if not apply:
        return model, calibration
    return dataclasses.replace(model, engines=scale_engines(base, fp, fd)), calibration
