"""vLLM's server with a deliberately small per-step token budget (``--max-num-batched-tokens
256``) and its development endpoints on (``VLLM_SERVER_DEV_MODE=1``, the only way vLLM 0.32 shows
its scheduler settings: ``GET /server_info``): the profile reads the budget from the engine and
measures how the engine mixes prefill and decode (``--mixing``); ``predict`` uses both; trials
near the predicted edge check it (docs/design.md §13, docs/conformance.md)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from . import _commands as cmd
from ._edge_check import MAX_NUM_SEQS, run_edge_check
from ._edge_claims import EdgeCheck
from ._state import Conformance
from ._suite import Suite, run_suite, write_transcript

VARIANT = "budget-256"
BUDGET = 256
#: Rates around the predicted edge (its 0.5 crossing), from a clear pass to a clear miss.
FACTORS = (0.5, 0.85, 1.0, 1.15, 1.5)


@pytest.fixture(scope="module")
def suite(conformance: Conformance) -> Iterator[Suite]:
    """The small-budget server, profiled with mixing points."""
    extra = ("--max-num-batched-tokens", str(BUDGET), "--max-num-seqs", str(MAX_NUM_SEQS))
    with conformance.server(VARIANT, extra=extra, env={"VLLM_SERVER_DEV_MODE": "1"}) as server:
        done = run_suite(VARIANT, server, conformance.folder(VARIANT), profile_extra=("--mixing",))
        yield done
        write_transcript(done)


@pytest.fixture(scope="module")
def edge_check(suite: Suite, conformance: Conformance) -> EdgeCheck:
    """``predict`` near the edge from this server's profile, and a trial at each rate."""
    if not suite.store.is_file() or not suite.workload.is_file():
        pytest.fail(f"no profile or no workload to predict from\n{suite.profile.brief()}")
    check = run_edge_check(suite, suite.root / "edge-check", FACTORS)
    suite.extra_done.extend(check.done)
    profile = suite.profile_doc()
    conformance.record(
        VARIANT,
        scheduler=profile.get("scheduler"),
        mixing_fit={
            k: (profile.get("mixing_fit") or {}).get(k)
            for k in ("coefficients", "mean_rel_error", "worst_rel_error")
        },
        prediction_check=check.figures(),
    )
    return check


def test_the_profile_reads_the_budget_from_the_engine(suite: Suite) -> None:
    """The engine's ``/server_info`` shows 256 and the profile records it with source engine,
    beside its running-sequence cap; the store holds a mixing fit (format_version 2)."""
    assert suite.profile.returncode == 0, suite.profile.brief()
    info = cmd.get_json(f"{suite.server.url}/server_info?config_format=json", suite.headers)
    assert info["vllm_config"]["scheduler_config"]["max_num_batched_tokens"] == BUDGET
    store = cmd.read_json(suite.store)
    assert store["format_version"] == 2
    scheduler = suite.profile_doc()["scheduler"]
    assert scheduler["max_num_batched_tokens"] == {"value": BUDGET, "source": "engine"}
    assert scheduler["max_num_seqs"] == {"value": MAX_NUM_SEQS, "source": "engine"}
    assert scheduler["chunked_prefill"] == {"value": True, "source": "engine"}
    assert suite.profile_doc()["mixing_fit"] is not None, suite.profile.brief()


def test_predictions_use_the_budget_the_mixing_and_the_probe(edge_check: EdgeCheck) -> None:
    """``predict`` says it used the engine's budget, the measured mixing and the freshness probe
    taken just before the trials (``--calibrate PROBE``); every trial kept its schedule."""
    figures = edge_check.figures()
    engine = edge_check.inputs["engines"]["vllm-0"]
    assert engine["max_num_batched_tokens"] == BUDGET, figures
    assert engine["max_num_batched_tokens_source"] == "profile, from the engine", figures
    assert engine["mixing"] == "measured", figures
    probe = edge_check.probe
    assert probe is not None and set(probe["prefill"]) == {"vllm-0"}, figures
    assert all(r.schedule_valid for r in edge_check.rates), figures


def test_probe_calibrated_predictions_can_be_wrong_and_are_not(edge_check: EdgeCheck) -> None:
    """As on the default server: at 0.5 times the predicted edge an informative range (at most
    0.3 wide); at 1.5 times it a predicted (pass probability at most 0.1) and a measured miss;
    whether the range holds the measured attainment and whether the measured edge lies inside
    the predicted 0.9-0.1 band are recorded, not asserted (``EdgeCheck.asserted_claims``)."""
    claims = edge_check.asserted_claims()
    assert all(claims.values()), edge_check.brief()
