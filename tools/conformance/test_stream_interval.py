"""vLLM's server with ``--stream-interval 4`` (four tokens per SSE chunk): the full suite, chunks
that carry several tokens, and the stored decode TPOT within 5% of what the engine served."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterator

import pytest

from narwhal_sim.testing import free_port
from narwhal_store import BURSTY_SHARE

from . import _commands as cmd
from . import _tracing as tracing
from ._checks import RefusalChecks, SuiteChecks, decode_streams
from ._server_view import ServerViewChecks, spans_trial
from ._state import Conformance
from ._suite import IID, Shape, Suite, run_suite, write_transcript
from ._tpot import compare, per_cohort

VARIANT = "stream-interval-4"
INTERVAL = 4
TOLERANCE = 0.05
#: The share of cohorts that must be within TOLERANCE.
SHARE = 0.75
#: Short decode prompts so that no cohort's engine time holds a long prefill (see _tpot), long
#: streams (192 tokens: a delivery stall at either end weighs little), every point three times
#: (12 cohorts); the trial's 32-token workload lies inside both fits' domains.
SHAPE = Shape((32, 128, 512, 1024), (16, 32), (1, 4), 192, 3, 3, 32, 16)


@pytest.fixture(scope="module")
def suite(conformance: Conformance) -> Iterator[Suite]:
    """The interval-4 server (exporting its per-request trace spans to the trial's receiver),
    started for this module only, and the commands run against it: the suite with the receiver
    as a sink, then a trial with spans (``run --otlp-receiver`` on the same port)."""
    folder = conformance.folder(VARIANT)
    port = free_port()
    extra = ("--stream-interval", str(INTERVAL), "--otlp-traces-endpoint",
             tracing.endpoint(port, IID))  # fmt: skip
    with conformance.server(VARIANT, extra=extra, env=tracing.server_env()) as server:
        with tracing.sink(folder, IID, port) as sink:
            done = run_suite(VARIANT, server, folder, SHAPE)
            ids = [s["request_id"] for s in decode_streams(done)] if done.sidecar.is_file() else []
            done.spans = tracing.wait_for_spans(sink.spans_path, ids)
        done.extra_done.append(spans_trial(done, port))
        yield done
        write_transcript(done)
        figures: dict[str, object] = {
            "profile_exit": done.profile.returncode,
            "profile_wall_s": round(done.profile.wall_s, 1),
        }
        figures["server_view"] = ServerViewChecks.figures(done)
        if done.sidecar.is_file():
            figures["itl_histogram_vs_stored"] = compare(done)
            cohorts = per_cohort(done, done.spans)
            figures["cohorts_vs_engine_spans"] = [c.figures() for c in cohorts]
        conformance.record(VARIANT, **figures)


class TestStreamInterval(SuiteChecks, RefusalChecks, ServerViewChecks):
    """Every protocol truth with four tokens per chunk."""

    def test_chunks_carry_several_tokens(self, suite: Suite) -> None:
        """The server really batched: decode chunks carry up to 4 tokens, so a stream has fewer
        chunks than tokens (in the sidecar and in the trial's records)."""
        streams = decode_streams(suite)
        assert streams
        assert max(max(s["chunk_tokens"]) for s in streams) == INTERVAL
        assert all(len(s["chunk_tokens"]) < sum(s["chunk_tokens"]) for s in streams)
        records = cmd.read_jsonl(suite.run_file("requests.jsonl"))
        assert records and all(r["chunks"] < r["completion_tokens"] for r in records), records

    def test_stored_tpot_within_5_percent_of_what_the_engine_served(self, suite: Suite) -> None:
        """Each stored cohort TPOT against the engine's own (its trace spans, ``_tpot``): the
        median ratio over every cohort within 5%, and at least three quarters of the cohorts
        delivered without bursts within 5% each; at least half the sweep's cohorts stored.

        A cohort whose chunks a starved API server held back and flushed in bursts (the sidecar's
        ``burst_share`` at or above ``BURSTY_SHARE``, which the profiler names) reads off by up to
        a few tens of percent either way on a loaded machine: that is the host, not the counting.
        The median over all cohorts still holds then (a miscounted chunk would put it off by the
        stream interval, 4x); the per-cohort bound is held where the delivery allows it.
        """
        assert suite.profile.returncode == 0, suite.profile.brief()
        cohorts = per_cohort(suite, suite.spans)
        samples = suite.samples_doc()["decode_samples"]
        assert len(cohorts) >= len(samples) / 2, [c["reason"] for c in samples]
        figures = [c.figures() for c in cohorts]
        assert abs(statistics.median(c.ratio for c in cohorts) - 1) <= TOLERANCE, figures
        steady = [c for c in cohorts if c.burst_share is None or c.burst_share < BURSTY_SHARE]
        within = [c for c in steady if abs(c.ratio - 1) <= TOLERANCE]
        assert len(within) >= math.ceil(SHARE * len(steady)), figures

    def test_store_holds_the_cohort_tpots(self, suite: Suite) -> None:
        """The decode fit's observed points are exactly the sidecar's cohort TPOTs."""
        observed = sorted(r["observed"] for r in suite.profile_doc()["decode_fit"]["residuals"])
        cohorts = sorted(c["tpot_s"] for c in suite.samples_doc()["decode_samples"] if c["valid"])
        assert observed == pytest.approx(cohorts, rel=1e-12)
