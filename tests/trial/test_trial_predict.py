"""``predict`` on hand-made profiles whose answers are known in closed form."""

from __future__ import annotations

import json
import math
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from narwhal_trial.documents._prediction import Prediction
from narwhal_trial.predictor._model import OutsideDomainError, TrialTarget
from narwhal_trial.predictor._predict import PredictRequest, predict
from narwhal_trial.predictor._vtime import TrialShape

from ._store_kit import write_profiles
from .conftest import Cli

L = 8192  # = max_num_batched_tokens: one prompt per step
LENGTHS = [2048, 4096, 8192, 12288]
ZERO_DECODE = {"d0": 0.0, "d1": 0.0, "d2": 0.0}


def _fleet(folder: Path, engines: list[dict[str, Any]]) -> Path:
    for k, e in enumerate(engines):
        e.setdefault("url", f"http://127.0.0.1:{9100 + k}")
    doc = {
        "format": "narwhal.fleet",
        "format_version": 1,
        "profiles": {"path": "profiles/fleet-profiles.json"},
        "engines": engines,
    }
    path = folder / "fleet.json"
    path.write_text(json.dumps(doc))
    return path


def _request(
    fleet: Path,
    store: Path,
    *,
    rate: float | None,
    ttft: str = "2",
    tpot: str = "0.0333",
    out: int = 128,
    requests: int = 200,
    find: bool = False,
    transfer: float = 0.0,
    input_tokens: int = L,
    max_in_flight: int | None = None,
) -> PredictRequest:
    return PredictRequest(
        fleet=fleet,
        profiles=store,
        limits=None,
        shape=TrialShape(input_tokens, out, requests, transfer, max_in_flight=max_in_flight),
        target=TrialTarget(Decimal(ttft), Decimal(tpot), Decimal("0.95")),
        rate=rate,
        find_max_rate=find,
    )


def _dd1_good(s: float, rate: float, bound: float, n: int) -> int:
    """D/D/1: request k waits k·(s - 1/rate) when the server is slower than the arrivals."""
    if s <= 1 / rate:
        return n if s <= bound else 0
    return min(n, max(0, math.floor((bound - s) / (s - 1 / rate)) + 1))


def _dd1_misses(s: float, rate: float, n: int, cap: int) -> int:
    """D/D/1 with the client's in-flight cap: an offer due while ``cap`` are in flight is missed."""
    finish: list[float] = []
    misses = 0
    for k in range(n):
        t = k / rate
        if sum(1 for f in finish if f > t) >= cap:
            misses += 1
            continue
        finish.append(max(t, finish[-1] if finish else 0.0) + s)
    return misses


@pytest.fixture
def single(tmp_path: Path) -> tuple[Path, Path]:
    """One mixed engine: every prompt takes exactly 0.5 s of GPU time, decode is free."""
    fleet = _fleet(tmp_path, [{"iid": "e0", "role": "mixed"}])
    prefill = {"a": 0.0, "b": 0.5 / L, "c": 0.0}
    store = write_profiles(fleet, LENGTHS, [4096, 8192], fits={"e0": (prefill, ZERO_DECODE)})
    return fleet, store


@pytest.mark.parametrize("rate", [1.0, 2.0, 2.35, 2.7, 4.0])
def test_constant_ttft_queue_matches_dd1(single: tuple[Path, Path], rate: float) -> None:
    """A single engine with constant TTFT s and one output token is a D/D/1 queue: request k's
    TTFT is s + k·(s - 1/rate), so the good count is known exactly."""
    fleet, store = single
    doc = predict(_request(fleet, store, rate=rate, out=1))
    assert doc.prediction is not None
    expected = _dd1_good(0.5, rate, 2.0, 200)
    assert doc.prediction.good == expected
    assert doc.prediction.attainment == expected / 200
    assert doc.prediction.passed is (expected >= 190)
    assert doc.prediction.ttft_s.p50 == pytest.approx(0.5 + max(0.0, 99.5 * (0.5 - 1 / rate)))


def test_in_flight_cap_keeps_offers_back(single: tuple[Path, Path]) -> None:
    """At twice the service rate the queue grows until the client's cap of 64 in flight keeps
    offers back, as ``run`` records them (schedule misses, never sent, never good)."""
    fleet, store = single
    doc = predict(_request(fleet, store, rate=4.0, out=1, max_in_flight=64))
    p = doc.prediction
    assert p is not None
    misses = _dd1_misses(0.5, 4.0, 200, 64)
    assert misses > 0 and p.schedule_misses == misses
    assert p.ttft_s.count == 200 - misses
    assert p.good == _dd1_good(0.5, 4.0, 2.0, 200)  # the first requests, before any miss


def test_find_max_rate_of_dd1(single: tuple[Path, Path]) -> None:
    """The highest passing rate of the D/D/1 queue: request 189 (the 190th) must meet 2 s."""
    fleet, store = single
    doc = predict(_request(fleet, store, rate=None, out=1, find=True))
    assert doc.search is not None and doc.search.max_rate is not None
    edge = 1 / (0.5 - (2.0 - 0.5) / 189)
    assert edge * 0.99 <= doc.search.max_rate <= edge
    assert doc.search.limited_by == "target"
    assert doc.search.at_max is not None and doc.search.at_max.passed
    assert any(state == "miss" and r <= edge * 1.01 for r, state in doc.search.tried)


def test_tpot_is_the_decode_fit(tmp_path: Path) -> None:
    """At a low rate each stream decodes alone: TPOT is the fit's d0 + d1 + d2·ctx."""
    fleet = _fleet(tmp_path, [{"iid": "e0", "role": "mixed"}])
    decode = {"d0": 0.01, "d1": 0.001, "d2": 1e-6}
    store = write_profiles(
        fleet, LENGTHS, [4096, 8192], fits={"e0": ({"a": 0.01, "b": 1e-6, "c": 0.0}, decode)}
    )
    doc = predict(_request(fleet, store, rate=0.1, requests=20))
    assert doc.prediction is not None
    # ctx grows from L + 1 to L + 127 over the 127 intervals: mean L + 64
    assert doc.prediction.tpot_s.p50 == pytest.approx(0.011 + 1e-6 * (L + 64), rel=1e-9)
    assert doc.prediction.good == 20
    slow = predict(_request(fleet, store, rate=0.1, requests=20, tpot="0.019"))
    assert slow.prediction is not None and slow.prediction.good == 0


def test_split_request_follows_the_router_policy(tmp_path: Path) -> None:
    """A prefill + decode fleet splits every request: TTFT = the prefill engine's TTFT + the KV
    transfer + the decode engine's off-GPU delay + its one-token step."""
    fleet = _fleet(tmp_path, [{"iid": "p", "role": "prefill"}, {"iid": "d", "role": "decode"}])
    fits = {
        "p": ({"a": 0.05, "b": 1e-5, "c": 0.0}, {"d0": 0.01, "d1": 0.0, "d2": 0.0}),
        "d": ({"a": 0.02, "b": 1e-5, "c": 0.0}, {"d0": 0.005, "d1": 0.0, "d2": 0.0}),
    }
    store = write_profiles(fleet, LENGTHS, [4096, 8192], fits=fits)
    doc = predict(_request(fleet, store, rate=0.5, requests=10, transfer=1e-6))
    assert doc.prediction is not None
    idle_prefill = 0.05 + 1e-5 * L
    expected = idle_prefill + 1e-6 * L + (0.02 - 0.005) + 0.005 + 1e-5
    assert doc.prediction.ttft_s.max == pytest.approx(expected, rel=1e-9)
    assert doc.prediction.tpot_s.max == pytest.approx(0.005, rel=1e-9)
    use = {e.iid: e for e in doc.prediction.engines}
    assert (use["d"].served, use["d"].prefilled, use["p"].served, use["p"].prefilled) == (
        10,
        0,
        0,
        10,
    )


def test_shared_group_adds_step_costs_unless_colocated(tmp_path: Path) -> None:
    """Two mixed engines in one GPU group share a device: under load their steps add up, so TPOT
    is higher than with the same fits measured --colocated (which already hold the slowdown)."""
    engines = [
        {"iid": "a", "role": "mixed", "shared_device": {"group": "g"}},
        {"iid": "b", "role": "mixed", "shared_device": {"group": "g"}},
    ]
    fits = {
        iid: ({"a": 0.02, "b": 2e-5, "c": 0.0}, {"d0": 0.005, "d1": 1e-4, "d2": 0.0})
        for iid in "ab"
    }
    fleet = _fleet(tmp_path, engines)
    shared = write_profiles(fleet, LENGTHS, [4096, 8192], fits=fits, concurrency=[1, 64])
    one = predict(_request(fleet, shared, rate=4.0, requests=40))
    (tmp_path / "profiles" / "fleet-profiles.json").unlink()
    (tmp_path / "profiles" / "fleet-profiles.samples.json").unlink()
    coloc = write_profiles(
        fleet, LENGTHS, [4096, 8192], fits=fits, concurrency=[1, 64], colocated=True
    )
    two = predict(_request(fleet, coloc, rate=4.0, requests=40))
    assert one.prediction is not None and two.prediction is not None
    assert {e.device for e in one.prediction.engines} == {"g"}
    assert {e.device for e in two.prediction.engines} == {"a", "b"}
    assert one.prediction.tpot_s.p50 is not None and two.prediction.tpot_s.p50 is not None
    assert one.prediction.tpot_s.p50 > two.prediction.tpot_s.p50 * 1.2


def test_interval_reflects_the_fit_residuals(tmp_path: Path) -> None:
    """A TTFT bound 5 % above an idle TTFT whose fit is off by up to 10 %: the nominal fleet
    passes, the pessimistic one misses everything, so the interval spans [0, 1]."""
    fleet = _fleet(tmp_path, [{"iid": "e0", "role": "mixed"}])
    store = write_profiles(
        fleet,
        LENGTHS,
        [4096, 8192],
        fits={"e0": ({"a": 0.0, "b": 1.0 / L, "c": 0.0}, ZERO_DECODE)},
        prefill_worst=0.10,
    )
    doc = predict(_request(fleet, store, rate=0.1, requests=20, out=1, ttft="1.05"))
    p = doc.prediction
    assert p is not None and p.passed and p.attainment == 1.0
    assert (p.attainment_interval.low, p.attainment_interval.high) == (0.0, 1.0)
    assert p.pass_interval == (False, True)


def test_refuses_to_extrapolate(single: tuple[Path, Path]) -> None:
    """An input length outside the prefill domain, or a decode batch beyond the profiled
    concurrency, is an error naming the domain."""
    fleet, store = single
    with pytest.raises(
        OutsideDomainError, match=r"prefill domain: input 16000 tokens, profile "
    ) as e:
        predict(_request(fleet, store, rate=1.0, input_tokens=16000))
    assert str(e.value).endswith(
        ": profile those lengths (narwhal-profile --prefill-lens and --decode-input-lens "
        "covering them)"
    )
    # decode is free and prefill takes 0.5 s: at 4 request/s the batch grows past 4
    with pytest.raises(OutsideDomainError, match=r"concurrency up to 4") as e:
        predict(_request(fleet, store, rate=4.0, out=2000))
    assert "neither a pass nor a miss can be shown; profile with --decode-concurrency up to" in (
        str(e.value)
    )


def test_cli_text_json_and_errors(cli: Cli, single: tuple[Path, Path], tmp_path: Path) -> None:
    """The command prints the text summary, or the JSON document (also written with --out,
    whatever the verdict); exit 0 when the prediction passes, 2 when it misses the target; a
    trial outside the domain (a refusal to extrapolate) is exit 1 with one line naming it, and
    nothing is written."""
    fleet, store = single
    args = [
        "predict", "--fleet", str(fleet), "--profiles", str(store), "--input-tokens", str(L),
        "--output-tokens", "1", "--requests", "200", "--ttft", "2", "--tpot", "0.0333",
        "--attainment", "0.95",
    ]  # fmt: skip
    proc = cli(*args, "--rate", "1")
    assert proc.returncode == 0, proc.stderr
    assert "rate 1/s: predicted 200 good (need 190), attainment 1.000" in proc.stdout
    out = tmp_path / "prediction.json"
    proc = cli(*args, "--rate", "2.5", "--find-max-rate", "--json", "--out", str(out))
    assert proc.returncode == 2, proc.stderr  # 2.5 request/s misses: the judged outcome
    assert proc.stderr == ""
    doc = Prediction.model_validate_json(proc.stdout)
    assert Prediction.model_validate_json(out.read_bytes()) == doc
    assert doc.format == "narwhal.trial.prediction" and doc.format_version == 5
    assert doc.prediction is not None and not doc.prediction.passed
    assert doc.search is not None and doc.search.max_rate is not None
    assert (out.stat().st_mode & 0o777) == 0o600
    bad = tmp_path / "bad.json"
    proc = cli(*args, "--rate", "1", "--input-tokens", "100", "--out", str(bad))
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1 and "prefill domain: input 100 tokens" in proc.stderr
    assert "Traceback" not in proc.stderr and not bad.exists()
    proc = cli(*args)
    assert proc.returncode == 1 and "give --rate, --find-max-rate, or both" in proc.stderr
    found = cli(*args, "--find-max-rate")  # a passing rate found, no --rate to judge: exit 0
    assert found.returncode == 0, found.stderr
    assert "highest passing rate: " in found.stdout and "none found" not in found.stdout
    unreachable = [*args[: args.index("--ttft") + 1], "0.000001", *args[args.index("--ttft") + 2 :]]
    none = cli(*unreachable, "--find-max-rate")  # no rate meets a 1 µs TTFT: a judged miss
    assert none.returncode == 2, none.stderr
    assert "highest passing rate: none found" in none.stdout and none.stderr == ""
