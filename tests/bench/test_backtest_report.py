"""The backtest's scoring half (bench/_backtest_report.py) on a hand-made work folder: what is
scored, what is left out and why, and the table written between the docs' markers."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def report(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(REPO))
    # the repo root is on sys.path only inside this fixture
    import bench._backtest_report as module

    return module


def _write(path: Path, doc: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc), encoding="utf-8")


def _prediction(median: float, low: float, high: float, p: float) -> dict[str, Any]:
    interval = {"low": low, "high": high}
    sources = {"engine_speed": high - low, "fits_bootstrap": 0.02, "request_noise": 0.04,
               "trial_sampling": 0.1, "requests": 60, "speed_from": "probe"}  # fmt: skip
    return {"prediction": {"attainment": median, "attainment_interval": interval,
                           "pass_probability": p, "spread_sources": sources}}  # fmt: skip


def _search(p90: float, p50: float, p10: float) -> dict[str, Any]:
    return {"search": {"band": {"pass_90": p90, "pass_50": p50, "pass_10": p10}}}


#: rate, good of 60, schedule valid, forecast with the probe, forecast from the profile
RATES = [
    (1.0, 60, True, _prediction(1.0, 0.95, 1.0, 1.0), _prediction(1.0, 0.9, 1.0, 0.9)),
    (2.0, 57, True, _prediction(0.95, 0.9, 1.0, 0.9), _prediction(1.0, 0.95, 1.0, 1.0)),
    (2.5, 10, False, _prediction(0.6, 0.3, 0.9, 0.2), _prediction(1.0, 0.9, 1.0, 0.9)),
    (3.0, 20, True, _prediction(0.3, 0.1, 0.5, 0.0), {"refused": 1, "why": "outside"}),
]


def _work(root: Path) -> Path:
    work = root / "work"
    _write(work / "backtest.json", {
        "started_at": "2026-12-08T10:00:00Z", "ended_at": "2026-12-08T10:20:00Z",
        "wall_s": 1200.0, "machine": {"cores": 2, "cpu": "AMD EPYC", "load_average": 0.5},
        "machine_end": {"cores": 2, "cpu": "AMD EPYC", "load_average": 1.5},
        "variants": ["sim", "vllm-256"], "factors": [0.5, 1.0, 1.25, 1.5], "requests": 60,
        "attainment": "0.9", "quick": False, "failed": {"vllm-256": "ServerError: no /health"},
    })  # fmt: skip
    shape = work / "sim" / "512x32"
    _write(work / "sim" / "variant.json", {"variant": "sim", "about": "simulated",
                                            "shapes": ["512x32"]})  # fmt: skip
    plan: dict[str, Any] = {
        "ttft_s": "0.05", "tpot_s": "0.008", "probe": {"prefill": 1.02, "decode": 0.97},
        "searches": {"probe": "search-probe.json", "profile": "search-profile.json"},
        "edge": 2.0, "rates": [],
    }  # fmt: skip
    _write(shape / "search-probe.json", _search(1.9, 2.1, 2.2))
    _write(shape / "search-profile.json", _search(2.4, 2.6, 2.8))
    for k, (rate, good, valid, probe, profile) in enumerate(RATES):
        _write(shape / f"rate-{k}-probe.json", probe)
        _write(shape / f"rate-{k}-profile.json", profile)
        summary = {"good": good, "requests": 60, "client_schedule_valid": valid,
                   "schedule_misses": {} if valid else {"lag": 4}}  # fmt: skip
        _write(shape / f"trial-{k}" / "summary.json", summary)
        plan["rates"].append({"factor": rate / 2, "rate": rate, "trial": f"trial-{k}",
                              "predictions": {"probe": f"rate-{k}-probe.json",
                                              "profile": f"rate-{k}-profile.json"}})  # fmt: skip
    _write(shape / "plan.json", plan)
    return work


def test_a_work_folder_is_scored_with_what_was_left_out_named(
    report: ModuleType, tmp_path: Path
) -> None:
    """The lagging trial is out of every score and named; the refused rate is out of the profile
    forecast's scores only; the measured bracket [2, 3] comes from the scored trials."""
    figures = report.backtest_figures(_work(tmp_path))
    (sim,) = figures["variants"]
    assert sim["trials"] == 3 and sim["pass_rate"] == pytest.approx(2 / 3)
    assert sim["left_out"] == [
        {"shape": "512x32", "rate": 2.5, "why": "the client fell behind (4 lag misses)"}
    ]
    assert sim["refused"] == [
        {"shape": "512x32", "rate": 3.0, "forecast": "profile", "why": "outside"}
    ]
    assert sim["shapes"][0]["measured_bracket"] == [2.0, 3.0]
    probe, profile = sim["scores"]["probe"], sim["scores"]["profile"]
    assert probe["cases"] == 3 and profile["cases"] == 2
    assert probe["brier"] == pytest.approx(0.01 / 3)
    assert probe["coverage"] == 1.0
    assert probe["crossing_error"] == 0.0  # 2.1 in [2, 3]
    assert profile["crossing_error"] == 0.0  # 2.6 too
    assert probe["targets"]["band_half_width"] is True  # (2.2 - 1.9) / 2 / 2.1 = 7 %
    # each source's width averaged over the scored rates only (not the lagging one's 0.6)
    assert probe["source_widths"]["engine_speed"] == pytest.approx((0.05 + 0.1 + 0.4) / 3)
    assert profile["source_widths"]["trial_sampling"] == pytest.approx(0.1)


def test_the_table_goes_between_the_markers_and_nowhere_else(
    report: ModuleType, tmp_path: Path
) -> None:
    text = report.markdown(report.backtest_figures(_work(tmp_path)))
    assert "2 cores (AMD EPYC)" in text and "20 min" in text
    assert "| sim | with the probe | 3 of 4 |" in text
    assert "**vllm-256**: did not finish (ServerError: no /health)" in text
    assert (
        "Mean width by source of spread, with the probe / profile only: engine speed 0.18 /" in text
    )
    assert "Left out: 512x32 at 2.5/s, the client fell behind (4 lag misses)." in text
    docs = tmp_path / "benchmarks.md"
    docs.write_text(f"# B\n\nbefore\n{report.BEGIN}\nold table\n{report.END}\nafter\n")
    report.publish(docs, text)
    page = docs.read_text()
    assert page.startswith("# B\n\nbefore\n") and page.endswith(f"{report.END}\nafter\n")
    assert "old table" not in page and text in page
    docs.write_text("no markers\n")
    with pytest.raises(SystemExit, match="markers"):
        report.publish(docs, text)
    assert docs.read_text() == "no markers\n"
