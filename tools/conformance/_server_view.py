"""The server's own view of a trial on vLLM's server: ``server.json`` from the engine's real
``/metrics`` page, and every request joined to its trace span (``run --otlp-receiver``).

``spans_trial`` runs one trial of ``SPANS_REQUESTS`` against a server that exports its spans to
127.0.0.1:``port`` (``--otlp-traces-endpoint .../v1/traces/<iid>``), with the suite's fleet file
so the page is the engine's. ``ServerViewChecks`` asserts the issue's truths: the metric names the
comparison reads are on 0.32's page, the engine's finished count is the client's, every completed
request matched its span, and the client's TTFT is at least the engine's for every request.
"""

from __future__ import annotations

from typing import Any

from narwhal_trial import RequestRecord, ServerDoc, Summary

from . import _commands as cmd
from ._suite import DRAIN_GAUGES, Suite, trial_args

SPANS_REQUESTS = 20
SPANS_RATE = "2"
RUN_NAME = "run-spans"


def spans_trial(suite: Suite, port: int) -> cmd.Done:
    """The trial with spans and the fleet's pages (its folder ``trial/run-spans``)."""
    gauges = [arg for gauge in DRAIN_GAUGES for arg in ("--drain-gauge", gauge)]
    return cmd.trial(
        "run",
        *trial_args(suite.server),
        "--workload", str(suite.workload),
        "--rate", SPANS_RATE,
        "--requests", str(SPANS_REQUESTS),
        "--ttft", "60", "--tpot", "5", "--attainment", "1", "--max-lag", "1",
        *gauges,
        "--fleet", str(suite.fleet),
        "--otlp-receiver", f"127.0.0.1:{port}",
        "--otlp-wait", "30",
        "--out", str(suite.root / "trial" / RUN_NAME),
        env=suite.env,
    )  # fmt: skip


def _done(suite: Suite) -> cmd.Done:
    return next(d for d in suite.extra_done if str(suite.root / "trial" / RUN_NAME) in d.argv)


def _summary(suite: Suite) -> Summary:
    return Summary.model_validate(cmd.read_json(suite.root / "trial" / RUN_NAME / "summary.json"))


class ServerViewChecks:
    """A trial with spans against vLLM's server (mixed into a variant's test class)."""

    @staticmethod
    def figures(suite: Suite) -> dict[str, Any]:
        """For results.json: counts, the graded gap, the client-added TTFT per request."""
        try:
            summary = _summary(suite)
        except (OSError, ValueError) as exc:
            return {"error": str(exc)}
        view = summary.server
        if view is None:
            return {"server": None}
        spans = view.spans
        gap = view.fleet.ttft
        added = {} if spans is None else spans.added_ttft_s
        return {
            "client_completed": view.fleet.client_completed,
            "server_completed": view.fleet.server_completed,
            "mean_ttft_client_ms": None if gap is None else round(gap.client_mean_s * 1e3, 3),
            "mean_ttft_server_ms": None if gap is None else round(gap.server_mean_s * 1e3, 3),
            "gap_fraction": None if gap is None else round(gap.gap_fraction, 4),
            "grade": None if gap is None else gap.grade,
            "spans_matched": None if spans is None else spans.matched,
            "client_added_ttft_ms": {
                k: None if v is None else round(float(v) * 1e3, 3)
                for k, v in added.items()
                if k != "count"
            },
            "warnings": view.warnings,
        }

    def test_server_json_holds_the_engines_real_metric_names(self, suite: Suite) -> None:
        """Both readings of the engine's page worked, and every family the comparison reads is
        on vLLM 0.32's page under the name we look for."""
        done = _done(suite)
        assert done.returncode == 0, done.brief()
        path = suite.root / "trial" / RUN_NAME / "server.json"
        doc = ServerDoc.model_validate(cmd.read_json(path))
        (page,) = doc.pages
        assert (page.name, page.kind, page.role) == ("vllm-0", "engine", "mixed")
        assert page.before.ok and page.after.ok and page.restarted is False, page
        assert page.missing == [], page.missing
        ttft = page.histograms["vllm:time_to_first_token_seconds"]
        assert ttft.count == SPANS_REQUESTS  # the warm-up came before the first reading

    def test_engine_counts_what_the_client_completed(self, suite: Suite) -> None:
        view = _summary(suite).server
        assert view is not None and view.warnings == [], view
        assert view.fleet.client_completed == view.fleet.server_completed == SPANS_REQUESTS
        assert view.fleet.ttft is not None and view.fleet.ttft.added_mean_s > 0, view.fleet

    def test_every_request_matched_and_client_ttft_at_least_the_servers(self, suite: Suite) -> None:
        """Each completed record has its span; the client's TTFT (send to first chunk) is at
        least the engine's (its arrival to its first token) for every request."""
        summary = _summary(suite)
        spans = summary.server.spans if summary.server is not None else None
        assert spans is not None
        assert (spans.matched, spans.client_only, spans.server_only) == (SPANS_REQUESTS, 0, 0)
        assert spans.negative == 0, spans
        records = [
            RequestRecord.model_validate(r)
            for r in cmd.read_jsonl(suite.root / "trial" / RUN_NAME / "requests.jsonl")
        ]
        assert len(records) == SPANS_REQUESTS
        for r in records:
            assert r.server is not None and r.ttft_s is not None, r
            assert r.server.engine == "vllm-0" and r.server.spans == 1
            assert r.ttft_s >= r.server.ttft_s, r
            assert r.server.queue_s is not None and r.server.decode_s is not None
        assert spans.added_ttft_s["p50"] is not None
