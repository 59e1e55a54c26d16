"""NVIDIA Dynamo 1.6.1's real OpenAI frontend with its GPU-free mocker engine behind it: what the
frontend shows and refuses, and our trial's prepare, run and check through it.

No vLLM server is involved (``-k dynamo`` selects this module alone). Nothing is timed: every
assertion is on counts, files and the frontend's own ``/metrics``; every wait polls a condition
with a generous deadline.
"""

from __future__ import annotations

import hashlib
import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from narwhal_sim.testing import free_port

from . import _commands as cmd
from ._dynamo import MAX_MODEL_LEN, MODEL_NAME, running
from ._dynamo_suite import (
    DRAIN_GAUGES,
    INPUT_TOKENS,
    MAX_NUM_BATCHED_TOKENS,
    MAX_NUM_SEQS,
    OUTPUT_TOKENS,
    OUTPUT_TOKENS_TOTAL,
    REQUESTS,
    REQUESTS_TOTAL,
    SCHEDULER_GAUGES,
    STARTED_TOTAL,
    DynamoSuite,
    counter,
    run_dynamo_suite,
    write_transcript,
)
from ._installed import Wheels
from ._installed_runs import (
    InstalledRun,
    assert_left_as_found,
    assert_no_version_changed,
    assert_runs_from_the_venv,
    assert_trial_ran,
    run_in_dynamo_venv,
)
from ._state import Conformance

VARIANT = "dynamo"
#: The folder and results.json key of narwhal-trial installed into Dynamo's venv.
INSTALLED = "installed-dynamo"
#: The fields Dynamo 1.6.1's frontend refuses on a completion (400 "Unsupported parameter(s)").
OMITTED = ("add_special_tokens", "return_token_ids")


@pytest.fixture(scope="module")
def dynamo_suite(dynamo: Conformance) -> Iterator[DynamoSuite]:
    """The frontend and the mocker, started for this module only, and our commands run against
    them; the figures go to results.json, the commands' outputs to ``commands.log``."""
    folder = dynamo.folder(VARIANT)
    with running(dynamo.python, folder, dynamo.model_dir, free_port()) as stack:
        dynamo.record(
            VARIANT,
            models_listed_s=round(stack.models_s or 0.0, 1),
            ready_s=round(stack.ready_s or 0.0, 1),
            command_lines=stack.command_lines(),
            model_dir=str(stack.model_dir),
        )
        done = run_dynamo_suite(stack, folder)
        yield done
        write_transcript(done)
        dynamo.record(VARIANT, **figures(done))
    dynamo.record(VARIANT, stop_exit_codes={p.name: p.exit_code for p in stack.procs})


def figures(suite: DynamoSuite) -> dict[str, Any]:
    """The commands' exits and wall times and the frontend's counters over the run."""
    before, after = suite.before, suite.after
    return {
        "exits": {d.argv[2]: d.returncode for d in (suite.prepare, suite.run, suite.check)},
        "prepare_without_tokenizer_exit": suite.prepare_bare.returncode,
        "trial_wall_s": round(suite.prepare.wall_s + suite.run.wall_s + suite.check.wall_s, 1),
        "run_counters": {
            "success": counter(after, REQUESTS_TOTAL, status="success")
            - counter(before, REQUESTS_TOTAL, status="success"),
            "all_statuses": counter(after, REQUESTS_TOTAL) - counter(before, REQUESTS_TOTAL),
            "started": counter(after, STARTED_TOTAL) - counter(before, STARTED_TOTAL),
            "output_tokens": counter(after, OUTPUT_TOKENS_TOTAL)
            - counter(before, OUTPUT_TOKENS_TOTAL),
            "invalid_request_failures": counter(
                after, "dynamo_frontend_failures_total", **{"class": "InvalidRequest"}
            )
            - counter(before, "dynamo_frontend_failures_total", **{"class": "InvalidRequest"}),
        },
        "idle_gauges_after_run": suite.idle,
        "scheduler_gauges": {k: after.sum(v) for k, v in SCHEDULER_GAUGES.items()},
        "model_context_length_gauge": after.sum("dynamo_frontend_model_context_length"),
    }


def post(url: str, body: dict[str, Any]) -> tuple[int, bytes]:
    """POST a completion; its status and raw body, whatever the status."""
    request = urllib.request.Request(
        f"{url}/v1/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=120) as answer:
            return int(answer.status), answer.read()
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, exc.read()


def events(raw: bytes) -> list[dict[str, Any]]:
    """The JSON events of an SSE body (``[DONE]`` left out)."""
    out = []
    for line in raw.splitlines():
        if line.startswith(b"data: {"):
            out.append(json.loads(line[len(b"data: ") :]))
    return out


def probe_status(probe: dict[str, Any]) -> int | None:
    """The HTTP status a manifest probe records (``http_status``, or an integer ``status``)."""
    for key in ("http_status", "status"):
        value = probe.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def scheduler_value(doc: dict[str, Any], key: str) -> Any:
    """A setting of the manifest's ``frontend_scheduler``: the number, or its ``value``."""
    value = doc[key]
    return value["value"] if isinstance(value, dict) else value


def request_fields_item(manifest: dict[str, Any], key: str) -> Any:
    """``request_fields[key]`` of the manifest (or a top-level ``key``)."""
    fields = manifest.get("request_fields") or {}
    return fields[key] if key in fields else manifest.get(key)


def assert_frontend_check(done: cmd.Done) -> None:
    """``check`` of the frontend fleet with an empty store and no launch record: the context
    limit, the prefix-caching item and the frontend's scheduler settings pass; exactly the
    accepted profile and the launch record fail (exit 2)."""
    assert done.returncode == 2, done.brief()
    lines = done.stdout.splitlines()
    need = INPUT_TOKENS + OUTPUT_TOKENS
    for ok in (
        f"ok   mocker: context limit: {need} tokens, max_model_len {MAX_MODEL_LEN}",
        "ok   mocker: scheduler settings (frontend): max_num_seqs 256, max_num_batched_tokens 8192",
    ):
        assert ok in lines, done.brief()
    assert any(
        line.startswith("ok   mocker: prefix caching off (metrics): a Dynamo frontend's page")
        for line in lines
    ), done.brief()
    failed = [line for line in lines if line.startswith("FAIL")]
    assert len(failed) == 2, done.brief()
    assert failed[0].startswith("FAIL mocker: accepted profile"), done.brief()
    assert failed[1].startswith("FAIL launch records: launch record"), done.brief()


class TestDynamoFrontend:
    """What the real frontend shows and refuses (independent of the trial's commands)."""

    def test_dynamo_lists_the_mocker_model_without_a_context_limit(
        self, dynamo_suite: DynamoSuite
    ) -> None:
        """/v1/models lists ``tiny`` alone, with ``context_window`` 0 and no max_model_len."""
        models = cmd.get_json(f"{dynamo_suite.stack.url}/v1/models")
        assert [m["id"] for m in models["data"]] == [MODEL_NAME], models
        (card,) = models["data"]
        assert card.get("context_window") == 0, card
        assert "max_model_len" not in card, card

    def test_dynamo_has_no_tokenize_version_or_server_info(self, dynamo_suite: DynamoSuite) -> None:
        """The vLLM endpoints the trial would otherwise ask are 404 on the frontend."""
        for path in ("/tokenize", "/version", "/server_info"):
            assert cmd.get_status(f"{dynamo_suite.stack.url}{path}") == 404, path

    def test_dynamo_metrics_show_the_gauges_and_the_scheduler(
        self, dynamo_suite: DynamoSuite
    ) -> None:
        """The drain gauges, the request counters and the mocker's scheduler settings (256
        sequences, 8,192 tokens a step) are on the frontend's /metrics."""
        page = cmd.metrics(dynamo_suite.stack.url)
        for name in (*DRAIN_GAUGES, REQUESTS_TOTAL, STARTED_TOTAL, OUTPUT_TOKENS_TOTAL):
            assert page.sum(name) is not None, f"{name} missing from /metrics"
        assert page.value(SCHEDULER_GAUGES["max_num_seqs"], model=MODEL_NAME) == MAX_NUM_SEQS
        budget = page.value(SCHEDULER_GAUGES["max_num_batched_tokens"], model=MODEL_NAME)
        assert budget == MAX_NUM_BATCHED_TOKENS

    def test_dynamo_refuses_the_fields_the_trial_omits(self, dynamo_suite: DynamoSuite) -> None:
        """A completion carrying add_special_tokens and return_token_ids: 400, naming both."""
        body = {
            "model": MODEL_NAME, "prompt": [11, 12, 13, 14], "max_tokens": 4,
            "add_special_tokens": False, "return_token_ids": True,
        }  # fmt: skip
        status, raw = post(dynamo_suite.stack.url, body)
        assert status == 400, raw
        message = json.loads(raw)["message"]
        assert "Unsupported parameter" in message, message
        for name in OMITTED:
            assert name in message, message

    def test_dynamo_streams_one_token_per_chunk(self, dynamo_suite: DynamoSuite) -> None:
        """Token-id prompt, min_tokens = max_tokens, ignore_eos, temperature 0, continuous usage:
        exactly N content chunks, each growing the usage count by one, no token_ids, and the
        final usage of N completion tokens and the prompt's length."""
        n = 12
        body = {
            "model": MODEL_NAME, "prompt": list(range(100, 140)), "max_tokens": n,
            "min_tokens": n, "ignore_eos": True, "temperature": 0, "stream": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True},
        }  # fmt: skip
        status, raw = post(dynamo_suite.stack.url, body)
        assert status == 200, raw
        stream = events(raw)
        content = [e for e in stream if e["choices"] and e["choices"][0].get("text")]
        assert len(content) == n, stream
        assert all("token_ids" not in e["choices"][0] for e in stream if e["choices"]), stream
        counts = [e["usage"]["completion_tokens"] for e in content if e.get("usage")]
        if counts:  # continuous usage stats on content chunks
            assert counts == list(range(1, n + 1)), counts
        usage = stream[-1]["usage"]
        assert usage["completion_tokens"] == n and usage["prompt_tokens"] == 40, stream[-1]


class TestDynamoTrial:
    """prepare, run and check through the frontend."""

    def test_dynamo_prepare_requires_a_tokenizer(self, dynamo_suite: DynamoSuite) -> None:
        """Without --tokenizer (its limit given) prepare gets no token ids: return_token_ids is
        refused, no logprobs come back, /tokenize is 404; exit 1 naming all three and
        --tokenizer, and no --out folder."""
        done = dynamo_suite.prepare_bare
        assert done.returncode == 1, done.brief()
        for said in (
            "return_token_ids (refused: HTTP 400",
            "logprobs with return_tokens_as_token_ids (no logprobs tokens in the answer)",
            "/tokenize of the completion text (HTTP 404",
            "Pass --tokenizer DIR",
        ):
            assert said in done.stderr, done.brief()
        assert not dynamo_suite.bare_out.exists(), done.brief()

    def test_dynamo_prepare_with_the_tokenizer(self, dynamo_suite: DynamoSuite) -> None:
        """With the model folder's tokenizer: a workload whose token ids come from it, bound to
        tokenizer.json's SHA-256, its context limit from the option."""
        assert dynamo_suite.prepare.returncode == 0, dynamo_suite.prepare.brief()
        workload = dynamo_suite.workload_doc()
        assert workload["model"] == MODEL_NAME
        assert workload["input_tokens"] == INPUT_TOKENS
        assert workload["output_tokens"] == OUTPUT_TOKENS
        assert workload["seed_prompt"]["token_ids_source"] == "tokenizer", workload
        tokenizer = workload["tokenizer"]
        digest = hashlib.sha256((dynamo_suite.stack.model_dir / "tokenizer.json").read_bytes())
        assert tokenizer["sha256"] == digest.hexdigest(), tokenizer
        assert workload["max_model_len_source"] == "option", workload
        assert workload["max_model_len"] == MAX_MODEL_LEN, workload
        assert workload["pool"], workload  # the mocker's served text, re-tokenized

    def test_dynamo_run_manifest_says_what_was_omitted(self, dynamo_suite: DynamoSuite) -> None:
        """The manifest lists exactly the two refused fields with a reason each, counts tokens
        from usage, keeps its probes, drained on the frontend's gauges and read its scheduler."""
        assert dynamo_suite.run.returncode == 0, dynamo_suite.run.brief()
        manifest = cmd.read_json(dynamo_suite.run_file("manifest.json"))
        omitted = request_fields_item(manifest, "omitted")
        assert sorted(o["field"] for o in omitted) == sorted(OMITTED), omitted
        assert all(isinstance(o["reason"], str) and o["reason"] for o in omitted), omitted
        assert request_fields_item(manifest, "token_counting") == "usage", manifest
        probes = request_fields_item(manifest, "probes")
        assert isinstance(probes, list) and probes, manifest
        assert manifest["limits"]["drain_gauges"] == list(DRAIN_GAUGES)
        scheduler = manifest["frontend_scheduler"]
        assert scheduler_value(scheduler, "max_num_seqs") == MAX_NUM_SEQS, scheduler
        assert scheduler_value(scheduler, "max_num_batched_tokens") == MAX_NUM_BATCHED_TOKENS

    def test_dynamo_run_counts_tokens_exactly(self, dynamo_suite: DynamoSuite) -> None:
        """Every request completed with the workload's output tokens, one chunk per token."""
        assert dynamo_suite.run.returncode == 0, dynamo_suite.run.brief()
        output = dynamo_suite.workload_doc()["output_tokens"]
        records = cmd.read_jsonl(dynamo_suite.run_file("requests.jsonl"))
        assert len(records) == REQUESTS
        for record in records:
            assert record["status"] == "completed", record
            assert record["completion_tokens"] == output, record
            assert record["prompt_tokens"] == INPUT_TOKENS, record
            assert record["chunks"] == output, record  # one token per chunk on Dynamo
        summary = cmd.read_json(dynamo_suite.run_file("summary.json"))
        assert summary["counts"]["completed"] == REQUESTS, summary["counts"]
        assert summary["warmup_status"] == "completed", summary

    def test_dynamo_counted_every_request_of_the_run(self, dynamo_suite: DynamoSuite) -> None:
        """The frontend's successful requests over the run = offers + the warm-up + the probes
        it answered 200; its refused probes are its InvalidRequest failures; it generated at
        least the records' tokens and the warm-up's."""
        manifest = cmd.read_json(dynamo_suite.run_file("manifest.json"))
        summary = cmd.read_json(dynamo_suite.run_file("summary.json"))
        probes = request_fields_item(manifest, "probes") or []
        statuses = [probe_status(p) for p in probes]
        assert None not in statuses, f"a probe without an HTTP status: {probes}"
        warmups = 1 if summary["warmup_status"] == "completed" else 0
        found = figures(dynamo_suite)["run_counters"]
        expected = REQUESTS + warmups + statuses.count(200)
        assert found["success"] == expected, (found, statuses)
        assert found["invalid_request_failures"] == statuses.count(400), (found, statuses)
        assert found["output_tokens"] >= (REQUESTS + warmups) * OUTPUT_TOKENS, found

    def test_dynamo_drained_and_nothing_leaked(self, dynamo_suite: DynamoSuite) -> None:
        """After the run the queued, in-flight and active gauges read 0 and every request the
        frontend started over the run also finished (started = finished, all statuses)."""
        assert dynamo_suite.idle and all(v == 0 for v in dynamo_suite.idle.values()), (
            dynamo_suite.idle
        )
        found = figures(dynamo_suite)["run_counters"]
        assert found["started"] == found["all_statuses"], found
        records = cmd.read_jsonl(dynamo_suite.run_file("requests.jsonl"))
        assert all(r["end_s"] is not None for r in records), "a request never ended"
        summary = cmd.read_json(dynamo_suite.run_file("summary.json"))
        assert len(summary["drain_s"]) == 2, summary["drain_s"]

    def test_dynamo_check_reads_the_frontend_and_fails_without_a_profile(
        self, dynamo_suite: DynamoSuite
    ) -> None:
        """check of a fleet reached through the frontend: the context limit (the operator's),
        the prefix-caching item (left to the launch records: the page has no cache config) and
        the scheduler settings it publishes (256 sequences, 8,192 tokens) pass; the accepted
        profile and the launch record, of which there are none, fail: exit 2."""
        assert_frontend_check(dynamo_suite.check)


@pytest.fixture(scope="module")
def installed_dynamo(
    dynamo_suite: DynamoSuite, dynamo: Conformance, wheels: Wheels
) -> InstalledRun:
    """narwhal-trial (with its tokenizer extra) installed with plain pip into Dynamo's own venv,
    prepare, run and check through the frontend from there, then taken out again."""
    venv = dynamo.python.parents[1]
    folder = dynamo.folder(INSTALLED)
    run = run_in_dynamo_venv(dynamo_suite.stack, venv, wheels, folder)
    dynamo.record(INSTALLED, **run.figures())
    return run


class TestDynamoInstalled:
    """narwhal-trial installed into Dynamo's venv beside Dynamo's packages and run from there."""

    def test_dynamo_installed_changes_no_version(self, installed_dynamo: InstalledRun) -> None:
        """pip added packages (recorded) but moved none of Dynamo's: no pin conflict."""
        assert_no_version_changed(installed_dynamo.install)

    def test_dynamo_installed_runs_from_its_venv(self, installed_dynamo: InstalledRun) -> None:
        """narwhal-trial and its narwhal dependencies import from Dynamo's venv."""
        assert_runs_from_the_venv(installed_dynamo)

    def test_dynamo_installed_trial_through_the_frontend(
        self, installed_dynamo: InstalledRun
    ) -> None:
        """prepare with the tokenizer, a 16-request run on uvloop: every request completed."""
        assert_trial_ran(installed_dynamo, OUTPUT_TOKENS)

    def test_dynamo_installed_check(self, installed_dynamo: InstalledRun) -> None:
        """check through the frontend: the same verdict as the tier's own check."""
        assert_frontend_check(installed_dynamo.get("narwhal-trial check"))

    def test_dynamo_installed_venv_left_as_found(self, installed_dynamo: InstalledRun) -> None:
        """Afterwards Dynamo's venv holds exactly the packages it held before."""
        assert_left_as_found(installed_dynamo.install)
