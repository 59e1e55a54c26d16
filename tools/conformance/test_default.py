"""vLLM's own server with default streaming: the full suite, the refusals, and the profile's
figures (prefill and decode mean/worst relative error) for results.json."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from . import _browser as browser
from . import _commands as cmd
from ._checks import RefusalChecks, SuiteChecks, assert_check_verdict
from ._edge_check import MAX_NUM_SEQS, run_edge_check, write_limits
from ._edge_claims import EdgeCheck
from ._installed import Wheels
from ._installed_runs import (
    SHAPE,
    InstalledRun,
    assert_left_as_found,
    assert_no_version_changed,
    assert_runs_from_the_venv,
    assert_trial_ran,
    run_in_vllm_venv,
)
from ._state import Conformance
from ._suite import (
    DRAIN_GAUGES,
    TRIAL_BOUNDS,
    Suite,
    run_suite,
    trial_args,
    write_transcript,
)
from ._tpot import compare
from ._trace_check import WINDOWS, TraceReplay, check_replay, replay_samples

VARIANT = "default"
#: The folder and results.json key of our packages installed into vLLM's venv.
INSTALLED = "installed-vllm"
#: The limits file the suite's profile is given (the server's budget and cap).
PROFILE_LIMITS = "profile-limits.json"
#: vLLM 0.32's per-step token budget for its OpenAI server on a CPU (``--max-num-batched-tokens``
#: unset: 2,048 per CPU socket, vllm/engine/arg_utils.py); the server does not show it without
#: its development endpoints, so the profile is given it in a limits file.
CPU_DEFAULT_BUDGET = 2048


@pytest.fixture(scope="module")
def suite(conformance: Conformance) -> Iterator[Suite]:
    """The default server (at most ``MAX_NUM_SEQS`` sequences at once, the profile's largest decode
    batch: the prediction check's overloaded rates stay inside the profiled domain, in the model as
    in the engine), started for this module only, and the commands run against it."""
    folder = conformance.folder(VARIANT)
    limits = write_limits(folder, PROFILE_LIMITS, max_num_batched_tokens=CPU_DEFAULT_BUDGET)
    with conformance.server(VARIANT, extra=("--max-num-seqs", str(MAX_NUM_SEQS))) as server:
        done = run_suite(
            VARIANT, server, folder, profile_extra=("--limits", str(limits), "--mixing")
        )
        yield done
        write_transcript(done)
        conformance.record(VARIANT, **figures(done))


def figures(suite: Suite) -> dict[str, object]:
    """The profile's fit errors and wall times, when it wrote one."""
    out: dict[str, object] = {
        "profile_wall_s": round(suite.profile.wall_s, 1),
        "profile_exit": suite.profile.returncode,
        "trial_wall_s": round(suite.prepare.wall_s + suite.run.wall_s + suite.check.wall_s, 1),
        "store": str(suite.store),
    }
    if suite.store.is_file():
        profile = suite.profile_doc()
        for fit in ("prefill_fit", "decode_fit"):
            doc = profile[fit] or {}
            out[fit] = {k: doc.get(k) for k in ("mean_rel_error", "worst_rel_error", "worst_point")}
        out["decode_points"] = [
            {"x": r["x"], "observed_ms": round(r["observed"] * 1e3, 3)}
            for r in (profile["decode_fit"] or {}).get("residuals", [])
        ]
        out["itl_histogram_vs_stored"] = compare(suite)
    return out


class TestDefault(SuiteChecks, RefusalChecks):
    """Every protocol truth on the default server."""

    def test_fit_figures_match_the_store(self, suite: Suite) -> None:
        """The JSON result carries each fit's mean and worst relative error, as the store."""
        result = suite.profile.json()
        assert suite.profile.returncode == 0, suite.profile.brief()
        (fits,) = result["fits"]
        profile = suite.profile_doc()
        for side, fit in (("prefill", "prefill_fit"), ("decode", "decode_fit")):
            for key in ("mean_rel_error", "worst_rel_error"):
                assert fits[side][key] == pytest.approx(profile[fit][key], rel=1e-12)
        assert cmd.read_json(suite.sidecar)["format"] == "narwhal.samples"

    def test_the_profile_is_given_the_budget(self, suite: Suite) -> None:
        """Without its development endpoints vLLM shows no scheduler setting (``/server_info``
        is 404), so the profile records the limits file's budget and cap with source limits,
        chunked prefill as unknown, and the mixing points' fit (format_version 2)."""
        assert suite.profile.returncode == 0, suite.profile.brief()
        url = f"{suite.server.url}/server_info?config_format=json"
        assert cmd.get_status(url, suite.headers) == 404
        scheduler = suite.profile_doc()["scheduler"]
        assert scheduler == {
            "max_num_batched_tokens": {"value": CPU_DEFAULT_BUDGET, "source": "limits"},
            "max_num_seqs": {"value": MAX_NUM_SEQS, "source": "limits"},
            "chunked_prefill": {"value": None, "source": "unknown"},
        }
        assert cmd.read_json(suite.store)["format_version"] == 2
        assert suite.profile_doc()["mixing_fit"] is not None, suite.profile.brief()


def test_report_renders_in_chromium(suite: Suite) -> None:
    """narwhal-report over this server's profile store and trial run gives a page that headless
    Chromium renders with every section, no console message, and a screenshot in the run folder."""
    if not suite.store.is_file() or not (suite.run_dir / "summary.json").is_file():
        pytest.fail(f"no store or no trial run to report on\n{suite.profile.brief()}")
    page = suite.root / "report.html"
    done = cmd.report(suite.store, suite.run_dir, "--out", page)
    suite.extra_done.append(done)
    assert done.returncode == 0, done.brief()
    shot = browser.render(page, suite.root / "report.png")
    print(f"report screenshot: {shot.screenshot}")
    assert not shot.console, shot.console
    for ident in ("store-1", "trials", "trial-1-run"):
        assert f'id="{ident}"' in shot.dom, ident
    assert shot.dom.count("<svg") >= 5
    assert shot.screenshot.stat().st_size > 20_000  # a blank 1280x4000 PNG is a few kB


#: Offers 5.26 s apart: every kept-alive connection sits idle past vLLM's 5 s keep-alive
#: (``VLLM_HTTP_TIMEOUT_KEEP_ALIVE``) between two offers, so each would be lost to the server's
#: idle close if the client reused it.
SLOW_RATE = "0.19"
SLOW_REQUESTS = 4


def test_a_trial_with_gaps_past_the_keep_alive_loses_no_request(
    suite: Suite, conformance: Conformance
) -> None:
    """At 0.19 request/s against vLLM's server, every offer completes: no connect error."""
    out = suite.root / "trial" / "run-0.19"
    gauges = [arg for gauge in DRAIN_GAUGES for arg in ("--drain-gauge", gauge)]
    done = cmd.trial(
        "run", *trial_args(suite.server), "--workload", str(suite.workload),
        "--rate", SLOW_RATE, "--requests", str(SLOW_REQUESTS), *TRIAL_BOUNDS, *gauges,
        "--out", str(out), env=suite.env,
    )  # fmt: skip
    records = cmd.read_jsonl(out / "requests.jsonl")
    statuses = [r["status"] for r in records]
    conformance.record(
        VARIANT,
        slow_trial={
            "rate": float(SLOW_RATE),
            "exit": done.returncode,
            "statuses": statuses,
            "resends": sum(r["resends"] for r in records),
            "wall_s": round(done.wall_s, 1),
        },
    )
    assert done.returncode == 0, done.brief()
    assert statuses == ["completed"] * SLOW_REQUESTS, done.brief()


@pytest.fixture(scope="module")
def edge_check(suite: Suite, conformance: Conformance) -> EdgeCheck:
    """``predict`` across the edge from this server's profile, and a trial at each rate."""
    if not suite.store.is_file() or not suite.workload.is_file():
        pytest.fail(f"no profile or no workload to predict from\n{suite.profile.brief()}")
    check = run_edge_check(suite, suite.root / "edge-check")
    suite.extra_done.extend(check.done)
    conformance.record(VARIANT, prediction_check=check.figures())
    return check


def test_predictions_and_trials_across_the_edge(edge_check: EdgeCheck) -> None:
    """``predict`` and ``run`` across the predicted edge of vLLM's server: a band whose crossings
    are ordered, a pass probability that never rises with rate (the replications' common random
    numbers), a valid schedule in every 60-request trial at 0.5, 0.9, 1.0, 1.1 and 1.5 times
    the edge, the prediction built on the given budget and the measured mixing, with the engine's
    speed from a freshness probe taken just before (``--calibrate PROBE``, saying so)."""
    rates = edge_check.rates
    figures = edge_check.figures()
    assert all(r.schedule_valid for r in rates), figures
    probabilities = [r.predicted["pass_probability"] for r in rates]
    assert probabilities == sorted(probabilities, reverse=True), figures
    assert probabilities[0] > probabilities[-1], figures
    band = edge_check.band
    assert band["pass_90"] is None or band["pass_90"] <= band["pass_50"], figures
    assert band["pass_10"] is None or band["pass_50"] <= band["pass_10"], figures
    engine = edge_check.inputs["engines"]["vllm-0"]
    assert engine["max_num_batched_tokens"] == CPU_DEFAULT_BUDGET, figures
    assert engine["max_num_batched_tokens_source"] == "profile, from the limits", figures
    assert engine["mixing"] == "measured", figures
    probe = edge_check.probe
    assert probe is not None and set(probe["prefill"]) == {"vllm-0"}, figures
    assert all(r.predicted.get("spread_sources") for r in rates), figures


def test_probe_calibrated_predictions_can_be_wrong_and_are_not(edge_check: EdgeCheck) -> None:
    """The probe-calibrated prediction claims something a trial could refute, and the trials do
    not: at 0.5 times the predicted edge a 5-95 % range at most 0.3 wide; at 1.5 times it a pass
    probability of at most 0.1 and a trial that misses. Recorded, not asserted
    (``EdgeCheck.asserted_claims``): whether that range meets the measured attainment's Wilson
    95 % interval (a slow patch of the host twice doubled a few requests' TPOT there, where the
    range was [1.000, 1.000]), and whether the measured edge (highest passing rate, lowest missing
    one) lies inside the predicted band from the 0.9 to the 0.1 crossing (a profile whose mixing
    fit came out at no cost put the band above every rate tried). The figures are in
    results.json."""
    claims = edge_check.asserted_claims()
    assert all(claims.values()), edge_check.brief()


@pytest.fixture(scope="module")
def trace_replays(suite: Suite, conformance: Conformance) -> list[TraceReplay]:
    """A short window of each sample trace, prepared, replayed and reported on this server."""
    if not suite.store.is_file():
        pytest.fail(f"no profile to predict from\n{suite.profile.brief()}")
    replays = replay_samples(suite)
    for replay in replays:
        suite.extra_done.extend(replay.done)
        if replay.predicted is not None:
            suite.extra_done.append(replay.predicted)
    conformance.record(VARIANT, trace_replays={r.name: r.figures() for r in replays})
    return replays


@pytest.mark.parametrize("index", range(len(WINDOWS)), ids=[w[0] for w in WINDOWS])
def test_a_trace_window_replays_on_its_schedule(
    trace_replays: list[TraceReplay], index: int
) -> None:
    """Each format's sample, a few requests of it, and a Poisson workload: prepare (samples
    clipped to the served 4,096 tokens), predict, run at its speedup, report; every request with
    the engine's exact token counts."""
    check_replay(trace_replays[index])


@pytest.fixture(scope="module")
def installed_vllm(suite: Suite, conformance: Conformance, wheels: Wheels) -> InstalledRun:
    """Our wheels installed with plain pip into vLLM's own venv, every command run from there
    against this server, then taken out of the venv again (before any test asserts)."""
    venv = conformance.python.parents[1]
    folder = conformance.folder(INSTALLED)
    run = run_in_vllm_venv(suite, venv, wheels, folder, suite.root / PROFILE_LIMITS)
    conformance.record(INSTALLED, **run.figures())
    return run


class TestInstalledInVllmVenv:
    """narwhal-profile, narwhal-trial and narwhal-report installed into vLLM's venv beside vLLM's
    own pins (uvloop among them) and run from there, as an operator would."""

    def test_installed_changes_no_version_in_vllms_venv(self, installed_vllm: InstalledRun) -> None:
        """pip added packages (recorded) but moved none of vLLM's: no pin conflict."""
        assert_no_version_changed(installed_vllm.install)

    def test_installed_commands_run_from_vllms_venv(self, installed_vllm: InstalledRun) -> None:
        """Every package imports from vLLM's venv; nothing of the checkout is on the path."""
        assert_runs_from_the_venv(installed_vllm)

    def test_installed_profile_from_vllms_venv(self, installed_vllm: InstalledRun) -> None:
        """A small sweep: exit 0, one profile in the store."""
        done = installed_vllm.get("narwhal-profile")
        assert done.returncode == 0, done.brief()
        assert done.json()["fits"], done.brief()
        assert len(cmd.read_json(installed_vllm.store)["profiles"]) == 1

    def test_installed_trial_from_vllms_venv(self, installed_vllm: InstalledRun) -> None:
        """prepare, and a 16-request run on uvloop: every request sent and completed."""
        assert_trial_ran(installed_vllm, SHAPE.trial_output)

    def test_installed_check_and_predict_from_vllms_venv(
        self, installed_vllm: InstalledRun
    ) -> None:
        """check against the profile just made (the same verdict as the suite's), and predict
        from it (exit 0 or 2, a prediction)."""
        store = cmd.read_json(installed_vllm.store)
        assert_check_verdict(installed_vllm.get("narwhal-trial check"), store["profiles"][0])
        predict = installed_vllm.get("narwhal-trial predict")
        assert predict.returncode in (0, 2), predict.brief()
        prediction = json.loads(predict.stdout)["prediction"]
        assert 0 <= prediction["pass_probability"] <= 1, prediction

    def test_installed_report_from_vllms_venv(self, installed_vllm: InstalledRun) -> None:
        """narwhal-report over that store and run writes its page."""
        done = installed_vllm.get("narwhal-report")
        assert done.returncode == 0, done.brief()
        page = (installed_vllm.folder / "report.html").read_text(encoding="utf-8")
        for ident in ("store-1", "trial-1-run"):
            assert f'id="{ident}"' in page, ident

    def test_installed_vllms_venv_left_as_found(self, installed_vllm: InstalledRun) -> None:
        """Afterwards vLLM's venv holds exactly the packages it held before."""
        assert_left_as_found(installed_vllm.install)
