"""Fidelity and overhead of a default live sweep of one simulated engine (not part of the tests).

Starts one ``narwhal-sim`` engine (default preset, real time unless ``--time-scale``), runs the
``narwhal-profile`` command in-process with default sweep options, then prints:

* for every measured prefill length, the written prefill fit against the simulator's own idle TTFT
  model (``narwhal_sim.idle_ttft_s``), with the relative error (criterion: within 5%);
* for every measured decode point, the written decode fit against the simulator's TPOT model
  (``tpot_s``) at the point's concurrency and context (criterion: within 10%);
* the command's wall time, the time spent waiting on the engine (the union of the intervals in which
  at least one HTTP call to the engine was in flight) and the rest: the profiler's own overhead.

Run: ``.venv/bin/python bench/profile/sweep_fidelity.py [--time-scale X]``.
"""

from __future__ import annotations

import argparse
import functools
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import orjson

from narwhal_engine_client import EngineClient
from narwhal_profile_cli.cli import run
from narwhal_sim import get_preset, idle_ttft_s, tpot_s
from narwhal_sim.testing import start_sim_fleet

T = TypeVar("T")
_INTERVALS: list[tuple[int, int]] = []


def _timed(method: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[T]]:
    @functools.wraps(method)
    async def wrapper(*args: Any, **kwargs: Any) -> T:
        start = time.perf_counter_ns()
        try:
            return await method(*args, **kwargs)
        finally:
            _INTERVALS.append((start, time.perf_counter_ns()))

    return wrapper


def say(line: str) -> None:
    """One line of the report on stdout."""
    sys.stdout.write(line + "\n")


def _union_s(intervals: list[tuple[int, int]]) -> float:
    total, end = 0, None
    for lo, hi in sorted(intervals):
        if end is None or lo > end:
            total += hi - lo
            end = hi
        elif hi > end:
            total += hi - end
            end = hi
    return total / 1e9


def main() -> int:
    """Run the sweep and print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-scale", type=float, default=1.0)
    args = parser.parse_args()
    scale = args.time_scale
    for name in ("stream_completion", "health", "models", "tokenize", "version", "metrics"):
        setattr(EngineClient, name, _timed(getattr(EngineClient, name)))
    preset = get_preset()
    work = Path(tempfile.mkdtemp(prefix="narwhal-fidelity-"))
    try:
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import narwhal_profile_cli.cli"], check=True)
        import_s = time.perf_counter() - started
        with start_sim_fleet(work, [{"iid": "e0", "role": "mixed"}], time_scale=scale) as fleet:
            started = time.perf_counter()
            code = run(["--fleet", str(fleet.fleet_path)])
            wall_s = time.perf_counter() - started
            busy_s = float(fleet.state("e0")["device_busy_s"])
        if code != 0:
            return code
        store = orjson.loads((work / "profiles" / "fleet-profiles.json").read_bytes())
        profile = store["profiles"][0]
        say(f"preset {preset.name}, time scale {scale:g}")
        say("prefill: length, fit, sim idle TTFT model, relative error")
        coef = profile["prefill_fit"]["coefficients"]
        worst_prefill = 0.0
        for res in profile["prefill_fit"]["residuals"]:
            length = int(res["x"][0])
            fit = coef["a"] + coef["b"] * length + coef["c"] * length * length
            model = idle_ttft_s(preset, length) / scale
            err = (fit - model) / model
            worst_prefill = max(worst_prefill, abs(err))
            say(f"  {length:6d}  {fit * 1e3:9.3f} ms  {model * 1e3:9.3f} ms  {err:+7.2%}")
        say("decode: concurrency, ctx, fit, sim TPOT model, relative error")
        dcoef = profile["decode_fit"]["coefficients"]
        worst_decode = 0.0
        for res in profile["decode_fit"]["residuals"]:
            n, ctx = int(res["x"][0]), float(res["x"][1])
            fit = dcoef["d0"] + dcoef["d1"] * n + dcoef["d2"] * n * ctx
            model = tpot_s(preset, n, ctx) / scale
            err = (fit - model) / model
            worst_decode = max(worst_decode, abs(err))
            shown = f"{fit * 1e3:7.3f} ms  {model * 1e3:7.3f} ms  {err:+7.2%}"
            say(f"  n={n:3d} ctx={ctx:8.1f}  {shown}")
        waiting_s = _union_s(_INTERVALS)
        say(f"worst prefill error {worst_prefill:.2%} (criterion 5%)")
        say(f"worst decode error {worst_decode:.2%} (criterion 10%)")
        say(f"command wall time (in-process) {wall_s:.2f} s; start + imports {import_s:.2f} s")
        say(f"waiting on the engine {waiting_s:.2f} s (simulated GPU busy {busy_s:.2f} s)")
        own_s = wall_s - waiting_s
        say(f"profiler overhead {own_s:.2f} s ({own_s / wall_s:.1%})")
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
