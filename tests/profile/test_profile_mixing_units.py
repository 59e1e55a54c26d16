"""The mixing points' parts that need no engine: options, budget, sizing, verdicts, text."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import orjson
import pytest

from narwhal_fit import DecodePoint, fit_decode, fit_prefill, prefill_work_s
from narwhal_profile_cli._modes import select_mode
from narwhal_profile_cli._options import MixingOptions, RawOptions, validate
from narwhal_profile_cli.cli import run
from narwhal_profile_cli.results._quality import fit_lines
from narwhal_profile_cli.sweeps import _mixing as ms
from narwhal_profile_cli.sweeps import _mixing_plan as mp
from narwhal_profile_cli.sweeps._metrics_watch import MetricsWatch, Observation
from narwhal_profile_cli.sweeps._preflight import SweepPoints


@pytest.fixture
def fleet_file(tmp_path: Path) -> Path:
    """A valid fleet whose engine cannot be reached (nothing may get past validation)."""
    path = tmp_path / "fleet.json"
    engines = [{"iid": "e0", "url": "http://127.0.0.1:9", "role": "mixed"}]
    doc = {"format": "narwhal.fleet", "format_version": 1, "profiles": {"path": "p/s.json"}}
    path.write_bytes(orjson.dumps({**doc, "engines": engines}))
    return path


def test_mixing_options_and_defaults() -> None:
    """--mixing alone takes the defaults; without it the sweep has no mixing."""
    assert validate(RawOptions(fleet="f")).sweep.mixing is None
    assert validate(RawOptions(fleet="f", mixing=True)).sweep.mixing == MixingOptions(
        lens=None, concurrency=4, prefills=4, repeats=1
    )
    given = validate(
        RawOptions(
            fleet="f",
            mixing=True,
            mixing_lens="8192, 512",
            mixing_concurrency="8",
            mixing_prefills="2",
            mixing_repeats="3",
        )
    )
    assert given.sweep.mixing == MixingOptions(
        lens=(512, 8192), concurrency=8, prefills=2, repeats=3
    )
    assert select_mode(given).mode == "live"


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--mixing", "--mixing-lens", "0"], "--mixing-lens: item '0' of '0' is not positive"),
        (["--mixing", "--mixing-lens", "abc"], "--mixing-lens: item 'abc' of 'abc' is not an"),
        (["--mixing", "--mixing-lens", "512,0"], "--mixing-lens: item '0' of '512,0' is not"),
        (["--mixing", "--mixing-lens", "512"], "at least 2 are required"),
        (["--mixing", "--mixing-lens", ""], "--mixing-lens: the list is empty"),
        (["--mixing", "--mixing-concurrency", "0"], "--mixing-concurrency: '0' is not positive"),
        (["--mixing", "--mixing-concurrency", "1025"], "above the maximum of 1024"),
        (["--mixing", "--mixing-prefills", "x"], "--mixing-prefills: 'x' is not an integer"),
        (["--mixing", "--mixing-prefills", "101"], "above the maximum of 100"),
        (["--mixing", "--mixing-repeats", "nan"], "--mixing-repeats: 'nan' is not finite"),
        (["--mixing-lens", "0"], "--mixing-lens: item '0' of '0' is not positive"),
        (["--mixing-lens", "512,1024"], "--mixing-lens requires --mixing"),
        (["--mixing-prefills", "2"], "--mixing-prefills requires --mixing"),
        (["--refit-samples", "s", "--out", "o", "--mixing"], "--mixing applies to live sweeps"),
        (
            ["--merge", "a", "--merge", "b", "--out", "o", "--mixing-repeats", "2"],
            "--mixing-repeats applies to live sweeps, not to --merge",
        ),
    ],
)
def test_mixing_usage_errors_exit_2_and_write_nothing(
    fleet_file: Path, capsys: pytest.CaptureFixture[str], args: list[str], needle: str
) -> None:
    """A bad mixing value or a misplaced mixing option exits 2 naming it; nothing is written."""
    before = sorted(p.name for p in fleet_file.parent.iterdir())
    assert run(["--fleet", str(fleet_file), *args]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("narwhal-profile: error: ") and err.count("\n") == 1
    assert needle in err
    assert sorted(p.name for p in fleet_file.parent.iterdir()) == before


def test_help_teaches_the_mixing_point(capsys: pytest.CaptureFixture[str]) -> None:
    """--help says what --mixing measures, what it costs and what it writes."""
    assert run(["--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    for needle in (
        "--mixing ",
        "how much of a prefill's time lands on the streams",
        "share*(b*L + c*L^2) + step_s*chunks",
        "Cost per point",
        "format_version 2",
        "--mixing-lens",
        "--mixing-concurrency",
        "--mixing-prefills",
        "--mixing-repeats",
    ):
        assert needle in text, needle


def test_unknown_budget_is_the_predictors_default() -> None:
    """Chunks are counted with 8192 tokens a step when the engine's budget is unknown."""
    assert mp.DEFAULT_BATCHED_TOKENS == 8192


def test_concurrency_and_lengths() -> None:
    """A limit leaves the prefill a slot; the default lengths are the sweep's extremes."""
    assert mp.mixing_concurrency(4, None) == 4
    assert mp.mixing_concurrency(4, 16) == 4
    assert mp.mixing_concurrency(4, 4) == 3
    assert mp.mixing_concurrency(4, 1) == 1
    assert mp.mixing_lens(MixingOptions(), (256, 1024, 16384)) == (256, 16384)
    assert mp.mixing_lens(MixingOptions(lens=(300, 400)), (256, 16384)) == (300, 400)
    points = SweepPoints((256, 1024, 16384), (512, 4096), (1, 4), None)
    work = mp.mixing_work(points, MixingOptions(repeats=2))
    assert work > mp.mixing_work(points, MixingOptions())


def _context(max_model_len: int = 131072, budget: int | None = None) -> Any:
    lengths = [2048, 8192, 16384]
    prefill_fit = fit_prefill(lengths, [0.013 + 1.9e-5 * n + 5.1e-10 * n * n for n in lengths])
    decode_fit = fit_decode(
        [
            DecodePoint(n, ctx, 0.0053 + 5e-6 * n + 3.1e-8 * n * ctx)
            for n in (1, 4)
            for ctx in (600, 2100)
        ]
    )
    probe = SimpleNamespace(max_model_len=max_model_len, iid="e0")
    timings = [SimpleNamespace(length=2048, ttft_s=[0.06, 0.05, 0.07])]
    return mp.MixingContext(probe, timings, prefill_fit, decode_fit, budget)  # type: ignore[arg-type]


def test_point_sizing_covers_the_prefills() -> None:
    """The streams ask for enough tokens to decode through the ramp, both quiet stretches and every
    prefill; the interval is 3 median TTFTs (measured, else the fit's); chunks use the budget."""
    ctx = _context()
    point = mp.plan_point(ctx, 512, 4, 2048, 4)
    assert point.problem is None
    assert point.interval_s == pytest.approx(3 * 0.06)
    tpot = ctx.decode_fit.predict(4, 512)
    assert point.quiet_s == pytest.approx(max(20 * tpot, 0.1))
    span = point.wait_s + 4 * point.interval_s + point.quiet_s
    assert point.tokens * tpot >= mp.TOKEN_MARGIN * span
    assert point.chunks == 1
    assert point.work_s == pytest.approx(prefill_work_s(ctx.prefill_fit.coefficients, 2048))
    unprofiled = mp.plan_point(ctx, 512, 4, 16384, 4)
    assert unprofiled.interval_s == pytest.approx(3 * ctx.prefill_fit.predict(16384))
    assert unprofiled.chunks == 2  # 8192 tokens a step when the budget is unknown
    assert mp.plan_point(_context(budget=4096), 512, 4, 16384, 4).chunks == 4


def test_point_beyond_max_model_len_is_refused_with_its_reason() -> None:
    """Streams that cannot decode long enough, or a prefill that does not fit, are refused."""
    short = mp.plan_point(_context(max_model_len=2300), 2048, 4, 2048, 4)
    assert short.problem is not None
    assert short.problem.startswith(f"the streams need {short.tokens} output tokens")
    assert "max_model_len 2300 leaves 252 after 2048 input tokens" in short.problem
    run = ms._refused(short, 0)
    assert not run.valid and run.streams == [] and run.prefills == []
    assert run.sample().reason == short.problem
    too_long = mp.plan_point(_context(max_model_len=3000), 512, 4, 4096, 4)
    assert too_long.problem == "a prefill of 4096 tokens does not fit max_model_len 3000"


def _watch(*readings: tuple[int, int, float]) -> MetricsWatch:
    watch = MetricsWatch(client=None, clock_ns=lambda: 0)  # type: ignore[arg-type]
    watch.observations = [
        Observation(t_ns=t, waiting=w, running=4, kv_usage=0.1, preemptions=0, sent_ns=s)
        for s, t, w in readings
    ]
    return watch


def test_metrics_allow_one_waiting_prefill_inside_the_stretch() -> None:
    """Window 0..1000, prefills 300..700: one waiting request inside the stretch is the prefill
    waiting for its step; one before it, or two inside it, invalidate the point."""
    assert ms._metrics_problems(_watch((350, 360, 1.0)), 0, 1000, 300, 700) == []
    (before,) = ms._metrics_problems(_watch((100, 110, 1.0)), 0, 1000, 300, 700)
    assert "1 waiting request(s)" in before
    (two,) = ms._metrics_problems(_watch((350, 360, 2.0)), 0, 1000, 300, 700)
    assert "2 waiting request(s)" in two
    assert ms._metrics_problems(_watch((1100, 1110, 3.0)), 0, 1000, 300, 700) == []


def _run(reason: str | None, loss: float | None = 0.01) -> mp.MixingRun:
    return mp.MixingRun(
        input_len=512,
        concurrency=4,
        prefill_len=2048,
        interval_s=0.1,
        repeat=0,
        streams=[],
        prefills=[],
        work_s=0.009,
        chunks=1,
        loss_s=loss,
        reason=reason,
    )


def test_too_few_valid_points_leave_no_fit_and_warn() -> None:
    """One valid point cannot make a fit: no fit, a warning naming the engine and why, and one
    naming the points left out."""
    runs = [_run(None), _run("a prefill failed", None)]
    fit, why = mp.fit_runs(runs)
    assert fit is None and why is not None and why.startswith("1 valid mixing point(s) of 2: ")
    lines = mp.MixingResult(runs, fit, why).warnings("e0")
    assert lines[0] == (
        "e0: 1 mixing point(s) left out of the fit: input 512 x 4 + prefill 2048, repeat 1: "
        "a prefill failed"
    )
    assert lines[1].startswith("e0: no mixing fit: 1 valid mixing point(s) of 2: ")
    assert lines[1].endswith("; the profile was written without one")


def test_fit_lines_print_the_mixing_fit() -> None:
    """A profile with a mixing fit gets its share, step (ms) and errors on its fit line."""
    figure: dict[str, Any] = {
        "engine": "e0",
        "key": "e0 (...)",
        "prefill": {"mean_rel_error": 0.01, "worst_rel_error": 0.02, "worst_point": [256]},
        "decode": {"mean_rel_error": 0.01, "worst_rel_error": 0.03, "worst_point": [1, 600]},
        "decode_suspect": None,
    }
    assert fit_lines([figure]) == [
        "e0: prefill fit mean 1.0% worst 2.0%; decode fit mean 1.0% worst 3.0%"
    ]
    figure["mixing"] = {
        "share": 0.97,
        "step_s": 0.0008,
        "mean_rel_error": 0.031,
        "worst_rel_error": 0.08,
        "worst_point": [1, 0.01],
    }
    assert fit_lines([figure]) == [
        "e0: prefill fit mean 1.0% worst 2.0%; decode fit mean 1.0% worst 3.0%; "
        "mixing fit share 0.97, step 0.80 ms, mean 3.1% worst 8.0%"
    ]
