"""A mixing fit the points pulled to no cost is not believed, end to end.

On vLLM's CPU server beside other work, a short prefill's mixing point once measured a loss below
zero; the fit then came out at no cost (share 0, step 0, 302 % mean error) and the prediction let
every prefill run beside the decodes for free. The simulator's ``decode_drag_s`` fault makes the
same points: each step that decodes without a prefill chunk is slower, so the streams' quiet pace
is slower than their pace beside a short prefill. Here one engine is profiled with ``--mixing``
under that fault, and ``predict`` is asked about it: it refuses the fit, says so, and models
vLLM's chunked prefill instead. Nothing is timed: the fault is in the simulator's model, and the
losses are differences the same client measured.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from narwhal_fit import load_fit
from narwhal_sim.testing import start_sim_fleet
from narwhal_store import read_store
from narwhal_trial import Prediction
from narwhal_trial.predictor._engine_settings import MIXING_MEAN_LIMIT

from .conftest import REPO, Cli

pytestmark = pytest.mark.slow

SWEEP = (
    "--prefill-lens", "2048,8192,16384",
    "--decode-input-lens", "512,2048",
    "--decode-concurrency", "1,4",
    "--decode-tokens", "160",
    "--mixing",
)  # fmt: skip
TIME_SCALE = 4.0
"""As the profile suite's: the shortest prefill (2,048 tokens) is ~10 ms of real time."""
DRAG_S = 0.08
"""Simulated seconds per decode-only step (20 ms of real time at scale 4): more than the 2,048-token
prefill's whole chunk (~10 ms real), so that point's loss is about -9 ms; the 16,384-token
prefill's two chunks (~120 ms) still cost the streams about 50 ms."""


def test_a_fit_pulled_below_zero_is_refused_and_predict_says_so(cli: Cli, tmp_path: Path) -> None:
    with start_sim_fleet(
        tmp_path / "sim", [{"iid": "e0", "role": "mixed"}], time_scale=TIME_SCALE
    ) as fleet:
        fleet.set_faults("e0", decode_drag_s=DRAG_S)
        done = subprocess.run(
            [sys.executable, "-m", "narwhal_profile_cli", "--fleet", str(fleet.fleet_path), *SWEEP],
            capture_output=True, text=True, timeout=300, check=False, cwd=REPO,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
    store = fleet.fleet_path.parent / "profiles" / "fleet-profiles.json"
    loaded = read_store(store)
    points = loaded.sidecar.profiles[0].mixing_samples
    short = [p.loss_s for p in points if p.prefill_len == 2048]
    long = [p.loss_s for p in points if p.prefill_len == 16384]
    assert short and all(loss is not None and loss < 0 for loss in short), short
    assert long and all(loss is not None and loss > 0.02 for loss in long), long
    stored = loaded.store.profiles[0].mixing_fit
    assert stored is not None
    fit = load_fit(stored.to_dict())
    assert fit.mean_rel_error > MIXING_MEAN_LIMIT, fit

    shown = cli(
        "predict", "--fleet", str(fleet.fleet_path), "--profiles", str(store),
        "--input-tokens", "2048", "--output-tokens", "32", "--requests", "20", "--ttft", "1",
        "--tpot", "0.1", "--attainment", "0.9", "--rate", "1", "--replications", "1", "--json",
    )  # fmt: skip
    assert shown.returncode in (0, 2), shown.stderr
    used = Prediction.model_validate_json(shown.stdout).inputs.engines["e0"]
    assert (used.mixing, used.mixing_share, used.mixing_step_s) == ("assumed", 1.0, 0.0)
    detail = used.mixing_detail
    assert detail.startswith("assumed, WARNING: the profile's mixing fit is refused"), detail
    assert f"mean error {fit.mean_rel_error:.1%}" in detail, detail
    assert "vLLM's chunked prefill" in detail, detail
