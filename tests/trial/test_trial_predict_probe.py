"""``predict --calibrate PROBE``: each engine's speed from a freshness probe of its profile."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest

from narwhal_trial._errors import TrialUsageError
from narwhal_trial.predictor._model import TrialTarget
from narwhal_trial.predictor._predict import PredictRequest, predict
from narwhal_trial.predictor._probe_speed import (
    DEFAULT_PROBE_WEIGHT,
    UNSEEN_DECODE_SD,
    UNSEEN_PREFILL_SD,
)
from narwhal_trial.predictor._vtime import TrialShape

from ._probe_kit import write_probe
from ._store_kit import one_engine_store
from .conftest import Cli

FITS = ({"a": 0.02, "b": 4e-5, "c": 0.0}, {"d0": 0.004, "d1": 5e-4, "d2": 0.0})
SHAPE = TrialShape(512, 32, 40)
RATE = 4.0


@pytest.fixture
def fleet_and_store(tmp_path: Path) -> tuple[Path, Path]:
    return one_engine_store(tmp_path, FITS)


def _request(
    fleet: Path,
    store: Path,
    probe: Path | None,
    replications: int,
    *,
    apply: bool = False,
    weight: float | None = None,
) -> PredictRequest:
    return PredictRequest(
        fleet=fleet, profiles=store, limits=None, shape=SHAPE,
        target=TrialTarget(Decimal("1"), Decimal("0.05"), Decimal("0.9")), rate=RATE,
        find_max_rate=False, calibrate=probe, apply_calibration=apply,
        replications=replications, probe_weight=weight,
    )  # fmt: skip


@pytest.mark.parametrize("replications", [1, 40])
@pytest.mark.parametrize(
    ("weight", "prefill", "decode", "rel"), [(1.0, 1.3, 1.2, 0.08), (None, 2.0, 1.6, 0.04)]
)
def test_the_probe_sets_the_engine_speed(
    fleet_and_store: tuple[Path, Path],
    tmp_path: Path,
    replications: int,
    weight: float | None,
    prefill: float,
    decode: float,
    rel: float,
) -> None:
    """A probe that found prefill and decode slower makes the predicted TTFT and TPOT medians
    longer by its factors raised to the weight: taken whole at weight 1, a quarter of their log
    by default (the fits scaled with one replication; every replication's speed drawn from the
    probe's factors with more), and the document names the probe and the weight. Either
    tolerance is narrower than the gap to the other weight's figures."""
    fleet, store = fleet_and_store
    probe = write_probe(tmp_path / "probe.json", fleet, store, {"e": ([prefill] * 3, [decode] * 3)})
    power = DEFAULT_PROBE_WEIGHT if weight is None else weight
    plain = predict(_request(fleet, store, None, replications)).prediction
    slowed_doc = predict(_request(fleet, store, probe, replications, weight=weight))
    slowed = slowed_doc.prediction
    assert plain is not None and slowed is not None
    assert plain.ttft_s is not None and slowed.ttft_s is not None
    assert plain.tpot_s is not None and slowed.tpot_s is not None
    assert slowed.ttft_s.p50 == pytest.approx(prefill**power * plain.ttft_s.p50, rel=rel)
    assert slowed.tpot_s.p50 == pytest.approx(decode**power * plain.tpot_s.p50, rel=rel)
    use = slowed_doc.probe
    assert use is not None and use.probe == str(probe)
    assert use.prefill["e"] is not None and use.prefill["e"].factor == pytest.approx(prefill)
    assert use.drifted == ["e"]
    assert use.weight == power
    assert (use.unseen_prefill_sd, use.unseen_decode_sd) == (UNSEEN_PREFILL_SD, UNSEEN_DECODE_SD)


def test_a_probe_weight_without_a_probe_is_refused(
    cli: Cli, fleet_and_store: tuple[Path, Path], tmp_path: Path
) -> None:
    """--probe-weight without --calibrate PROBE: exit 1, one line naming the option and what
    was given instead; --out not written."""
    fleet, store = fleet_and_store
    out = tmp_path / "prediction.json"
    done = cli(
        "predict", "--fleet", str(fleet), "--profiles", str(store), "--input-tokens", "512",
        "--output-tokens", "32", "--requests", "40", "--ttft", "1", "--tpot", "0.05",
        "--attainment", "0.9", "--rate", "4", "--probe-weight", "0.5", "--out", str(out),
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "--probe-weight 0.5 is for --calibrate PROBE" in done.stderr, done.stderr
    assert "no --calibrate" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not out.exists()


def test_a_probe_without_drift_changes_nothing_with_the_fits_alone(
    fleet_and_store: tuple[Path, Path], tmp_path: Path
) -> None:
    fleet, store = fleet_and_store
    probe = write_probe(tmp_path / "probe.json", fleet, store, {"e": ([1.0], [1.0])})
    plain = predict(_request(fleet, store, None, 1)).prediction
    probed = predict(_request(fleet, store, probe, 1)).prediction
    assert plain is not None and probed is not None
    assert probed.ttft_s == plain.ttft_s and probed.tpot_s == plain.tpot_s


def test_a_probe_of_another_store_is_refused(
    fleet_and_store: tuple[Path, Path], tmp_path: Path
) -> None:
    fleet, store = fleet_and_store
    probe = write_probe(tmp_path / "probe.json", fleet, store, {"e": ([1.0], [1.0])})
    doc = json.loads(probe.read_text())
    doc["profiles_sha256"] = "f" * 64
    probe.write_text(json.dumps(doc))
    with pytest.raises(TrialUsageError, match=r"--calibrate .*probe\.json: the probe compared"):
        predict(_request(fleet, store, probe, 1))


def test_a_probe_missing_an_engine_is_refused(
    fleet_and_store: tuple[Path, Path], tmp_path: Path
) -> None:
    fleet, store = fleet_and_store
    probe = write_probe(tmp_path / "probe.json", fleet, store, {"other": ([1.0], [1.0])})
    with pytest.raises(TrialUsageError, match="the probe has no engine e"):
        predict(_request(fleet, store, probe, 1))


def test_apply_calibration_with_a_probe_is_refused(
    fleet_and_store: tuple[Path, Path], tmp_path: Path
) -> None:
    fleet, store = fleet_and_store
    probe = write_probe(tmp_path / "probe.json", fleet, store, {"e": ([1.0], [1.0])})
    with pytest.raises(TrialUsageError, match="--apply-calibration is for --calibrate RUN"):
        predict(_request(fleet, store, probe, 1, apply=True))


def test_the_command_names_a_malformed_probe_and_writes_nothing(
    cli: Cli, fleet_and_store: tuple[Path, Path], tmp_path: Path
) -> None:
    """A probe whose factors do not match its repeats: exit 1, one line naming the file and the
    JSON path; ``--out`` not written."""
    fleet, store = fleet_and_store
    probe = write_probe(tmp_path / "probe.json", fleet, store, {"e": ([1.1, 1.2], [1.0])})
    doc = json.loads(probe.read_text())
    doc["engines"]["e"]["points"][0]["factors"] = [1.1]
    probe.write_text(json.dumps(doc))
    out = tmp_path / "prediction.json"
    done = cli(
        "predict", "--fleet", str(fleet), "--profiles", str(store), "--input-tokens", "512",
        "--output-tokens", "32", "--requests", "40", "--ttft", "1", "--tpot", "0.05",
        "--attainment", "0.9", "--rate", "4", "--calibrate", str(probe), "--out", str(out),
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "probe.json" in done.stderr and "engines.e.points[0]" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert not out.exists()
