"""``predict --calibrate RUN``: the correction that makes the prediction at a measured run's rate
agree with it, reported always and applied only with ``--apply-calibration`` (design §13)."""

from __future__ import annotations

import json
import statistics
from decimal import Decimal
from pathlib import Path

import pytest

from narwhal_store import read_store
from narwhal_trial._errors import TrialUsageError
from narwhal_trial.predictor._calibrate import scale_engines
from narwhal_trial.predictor._model import TrialTarget, fleet_model
from narwhal_trial.predictor._predict import PredictRequest, predict
from narwhal_trial.predictor._vtime import TrialShape, simulate

from ._run_kit import write_run
from ._store_kit import one_engine_store
from .conftest import Cli

FITS = ({"a": 0.02, "b": 4e-5, "c": 0.0}, {"d0": 0.004, "d1": 5e-4, "d2": 0.0})
SHAPE = TrialShape(512, 32, 40)
RATE = 8.0
# the engine as it ran: prefill 20 % slower than profiled, decode 10 % slower
SLOW_PREFILL, SLOW_DECODE = 1.2, 1.1


@pytest.fixture
def fleet_and_store(tmp_path: Path) -> tuple[Path, Path]:
    return one_engine_store(tmp_path, FITS)


def _measured_run(fleet: Path, store: Path, out: Path, *, valid: bool = True) -> Path:
    """A run whose timings are the profile's engine slowed by the factors above."""
    from narwhal_store import load_fleet

    model = fleet_model(load_fleet(fleet), read_store(store), None, SHAPE)
    slow = scale_engines(model.engines, SLOW_PREFILL, SLOW_DECODE)
    got = simulate(slow, SHAPE, RATE)
    return write_run(
        out, rate=RATE, input_tokens=SHAPE.input_tokens, output_tokens=SHAPE.output_tokens,
        ttft_s=got.ttft, tpot_s=got.tpot, schedule_valid=valid,
    )  # fmt: skip


def _request(fleet: Path, store: Path, run: Path | None, apply: bool) -> PredictRequest:
    return PredictRequest(
        fleet=fleet, profiles=store, limits=None, shape=SHAPE,
        target=TrialTarget(Decimal("1"), Decimal("0.05"), Decimal("0.9")), rate=RATE,
        find_max_rate=False, calibrate=run, apply_calibration=apply,
    )  # fmt: skip


def test_the_correction_recovers_the_slowdown_and_is_applied_only_when_asked(
    fleet_and_store: tuple[Path, Path], tmp_path: Path
) -> None:
    fleet, store = fleet_and_store
    run = _measured_run(fleet, store, tmp_path / "run")
    plain = predict(_request(fleet, store, None, False))
    reported = predict(_request(fleet, store, run, False))
    c = reported.calibration
    assert c is not None and not c.applied
    assert c.prefill_factor == pytest.approx(SLOW_PREFILL, rel=0.01)
    assert c.decode_factor == pytest.approx(SLOW_DECODE, rel=0.01)
    assert c.predicted_tpot_p50_s < c.measured_tpot_p50_s
    assert reported.prediction == plain.prediction  # reported only: the profiles' own prediction
    applied = predict(_request(fleet, store, run, True))
    assert applied.calibration is not None and applied.calibration.applied
    assert applied.prediction is not None and plain.prediction is not None
    measured_tpot = statistics.median(
        json.loads(line)["tpot_s"] for line in (run / "requests.jsonl").read_text().splitlines()
    )
    assert applied.prediction.tpot_s.p50 == pytest.approx(measured_tpot, rel=0.01)
    assert applied.prediction.tpot_s.p50 > plain.prediction.tpot_s.p50


def test_bad_calibration_runs_are_refused(
    fleet_and_store: tuple[Path, Path], tmp_path: Path
) -> None:
    fleet, store = fleet_and_store
    with pytest.raises(TrialUsageError, match="needs --calibrate"):
        predict(_request(fleet, store, None, True))
    late = _measured_run(fleet, store, tmp_path / "late", valid=False)
    with pytest.raises(TrialUsageError, match="did not keep its schedule"):
        predict(_request(fleet, store, late, False))
    with pytest.raises(TrialUsageError, match=r"--calibrate .*missing"):
        predict(_request(fleet, store, tmp_path / "missing", False))


def test_cli_says_whether_the_correction_is_applied(
    cli: Cli, fleet_and_store: tuple[Path, Path], tmp_path: Path
) -> None:
    fleet, store = fleet_and_store
    run = _measured_run(fleet, store, tmp_path / "run")
    args = [
        "predict", "--fleet", str(fleet), "--profiles", str(store), "--input-tokens", "512",
        "--output-tokens", "32", "--requests", "40", "--ttft", "1", "--tpot", "0.05",
        "--attainment", "0.9", "--rate", str(RATE), "--replications", "1", "--calibrate", str(run),
    ]  # fmt: skip
    shown = cli(*args)
    assert shown.returncode in (0, 2), shown.stderr
    assert "decode x1.100" in shown.stdout and "not applied: --apply-calibration" in shown.stdout
    applied = cli(*args, "--apply-calibration")
    assert "APPLIED to this prediction" in applied.stdout
    refused = cli(*args[:-2], "--apply-calibration")
    assert refused.returncode == 1
    assert "--apply-calibration needs --calibrate" in refused.stderr
