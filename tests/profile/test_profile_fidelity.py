"""Fidelity: a sweep of the default simulator preset recovers the simulator's own latency model.

The profile measures wall time (that is the product), so load can only make it measure *more*:
this test asserts what no load can break and what still catches a wrong measurement. The fits may
not be faster than the model (beyond 5% / 10%: the simulator aims its wake-ups 0.5 ms early), and
may exceed it by at most 50% (a profile timing end-to-end instead of the first token, or counting
chunks instead of tokens, is off by far more). Simulated time runs 4x slower than real time
(``--time-scale 0.25``) so loopback costs are small against every timing. The tight criterion (5%
prefill, 10% decode) is checked on an idle machine by
``bench/profile/sweep_fidelity.py``; its figures are in docs/benchmarks.md. (With two
busy loops on the cores the 16-stream decode point once read +16%.)
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from narwhal_sim import get_preset, idle_ttft_s, tpot_s
from narwhal_sim.testing import start_sim_fleet

from ._command import run_profile_command

pytestmark = pytest.mark.slow

SCALE = 0.25


def test_default_preset_sweep_recovers_the_simulator_model(tmp_path: Path) -> None:
    """Prefill fit -5%..+50% of idle TTFT at every length; decode fit -10%..+50% of TPOT."""
    with start_sim_fleet(tmp_path, [{"iid": "e0", "role": "mixed"}], time_scale=SCALE) as fleet:
        done = run_profile_command(
            "--fleet",
            fleet.fleet_path,
            "--prefill-lens",
            "4096,8192,12288,16384",
            "--decode-input-lens",
            "512,4096",
            "--decode-concurrency",
            "1,16",
            "--decode-tokens",
            "64",
        )
    assert done.returncode == 0, done.stderr
    store = orjson.loads((tmp_path / "profiles" / "fleet-profiles.json").read_bytes())
    (profile,) = store["profiles"]
    preset = get_preset()

    coef = profile["prefill_fit"]["coefficients"]
    lengths = [int(r["x"][0]) for r in profile["prefill_fit"]["residuals"]]
    assert lengths == [4096, 8192, 12288, 16384]
    for length in lengths:
        fit = (coef["a"] + coef["b"] * length + coef["c"] * length**2) * SCALE
        model = idle_ttft_s(preset, length)
        assert -0.05 <= (fit - model) / model <= 0.5, (length, fit, model)

    dcoef = profile["decode_fit"]["coefficients"]
    points = [(int(r["x"][0]), float(r["x"][1])) for r in profile["decode_fit"]["residuals"]]
    assert {n for n, _ in points} == {1, 16}
    for n, ctx in points:
        fit = (dcoef["d0"] + dcoef["d1"] * n + dcoef["d2"] * n * ctx) * SCALE
        model = tpot_s(preset, n, ctx)
        assert -0.10 <= (fit - model) / model <= 0.5, (n, ctx, fit, model)
