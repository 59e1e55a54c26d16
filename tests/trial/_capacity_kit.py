"""A hand-made fleet shaped as the demo's: a prefill and a decode engine sharing one GPU beside a
mixed engine, with the fits ``narwhal-profile`` measures of the simulator's default preset and a
decode domain up to concurrency 16 (the demo's sweep)."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

from narwhal_trial.predictor._model import TrialTarget
from narwhal_trial.predictor._predict import PredictRequest
from narwhal_trial.predictor._vtime import TrialShape

from ._store_kit import write_profiles

LENGTHS = [2048, 4096, 8192, 12288]
INPUT_LENS = [4096, 8192]
CONCURRENCY = [1, 4, 16]
PREFILL = {"a": 0.0132, "b": 1.906e-05, "c": 5.5e-10}
DECODE = {"d0": 0.0053, "d1": 8e-06, "d2": 3.05e-08}
# the runbook's shape and target, and the simulator's KV transfer time
IN, OUT = 8192, 128
TARGET = TrialTarget(Decimal("2"), Decimal("0.0333"), Decimal("0.95"))
KV_TRANSFER_S_PER_TOKEN = 2.5e-6


def demo_like(folder: Path, concurrency: list[int] | None = None) -> tuple[Path, Path]:
    """The fleet file and its profile store (decode profiled at ``concurrency``, default
    ``CONCURRENCY``)."""
    engines = [
        {"iid": "h200-0.prefill", "role": "prefill", "shared_device": {"group": "h200-0"}},
        {"iid": "h200-0.decode", "role": "decode", "shared_device": {"group": "h200-0"}},
        {"iid": "h200-1.mixed", "role": "mixed"},
    ]
    for k, e in enumerate(engines):
        e["url"] = f"http://127.0.0.1:{9200 + k}"
    fleet = folder / "fleet.json"
    doc = {
        "format": "narwhal.fleet",
        "format_version": 1,
        "profiles": {"path": "profiles/fleet-profiles.json"},
        "engines": engines,
    }
    fleet.write_text(json.dumps(doc))
    fits = {str(e["iid"]): (PREFILL, DECODE) for e in engines}
    levels = CONCURRENCY if concurrency is None else concurrency
    store = write_profiles(fleet, LENGTHS, INPUT_LENS, fits=fits, concurrency=levels)
    return fleet, store


def request(
    fleet: Path,
    store: Path,
    rate: float | None,
    requests: int = 200,
    *,
    find: bool = False,
    replications: int = 1,
) -> PredictRequest:
    """``predict`` of the runbook's shape on the demo-like fleet."""
    return PredictRequest(
        fleet=fleet,
        profiles=store,
        limits=None,
        shape=TrialShape(IN, OUT, requests, KV_TRANSFER_S_PER_TOKEN),
        target=TARGET,
        rate=rate,
        find_max_rate=find,
        replications=replications,
    )
