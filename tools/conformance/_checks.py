"""Protocol truths every server variant must show (mixed into each variant's test class).

Each test reads the commands' outputs and files kept by the module's ``suite`` fixture, or sends
one request of its own; none of them compares a latency with a bound.
"""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
import uuid
from typing import Any

from narwhal_engine_client import EngineClient, EngineHTTPError, completion_body
from narwhal_store import DECODE_MEAN_BOUND, DECODE_WORST_BOUND

from . import _commands as cmd
from ._server import MAX_MODEL_LEN, SERVED_MODEL
from ._suite import COMPLETIONS_LOG, DRAIN_GAUGES, TRIAL_REQUESTS, Suite, delta


def decode_streams(suite: Suite) -> list[dict[str, Any]]:
    """Every decode stream of the sidecar."""
    return [s for c in suite.samples_doc()["decode_samples"] for s in c["streams"]]


def prefill_requests(suite: Suite) -> int:
    """Scored prefill requests in the sidecar."""
    return sum(len(p["ttft_s"]) for p in suite.samples_doc()["prefill_samples"])


def stream_ids(url: str, request_id: str, headers: dict[str, str]) -> list[str]:
    """Stream one completion with ``X-Request-Id`` and return every event's ``id``."""
    body = {
        "model": SERVED_MODEL,
        "prompt": [11, 12, 13, 14, 15, 16, 17, 18],
        "max_tokens": 8,
        "min_tokens": 8,
        "ignore_eos": True,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    request = urllib.request.Request(
        f"{url}/v1/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "X-Request-Id": request_id, **headers},
    )
    ids: list[str] = []
    with urllib.request.urlopen(request, timeout=120) as answer:
        for line in answer:
            if line.startswith(b"data: {"):
                ids.append(json.loads(line[len(b"data: ") :])["id"])
    return ids


def raw_error(url: str, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, Any]:
    """POST a completion expected to fail; the status and vLLM's own JSON error body."""
    request = urllib.request.Request(
        f"{url}/v1/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", **headers},
    )
    try:
        with urllib.request.urlopen(request, timeout=120) as answer:
            return int(answer.status), json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


async def _stream_record(url: str, key: str | None, body: bytes, request_id: str) -> Any:
    async with EngineClient(url, api_key=key, timeout_s=120.0) as client:
        return await client.stream_completion(body, request_id=request_id)


def assert_check_verdict(check: cmd.Done, profile: dict[str, Any]) -> None:
    """``check`` against the store holding ``profile``: at least five items (context limit, both
    profile domains, prefix caching from the metrics and the launch record) ``ok``, and the
    decode-fit-quality item ``ok`` (exit 0) exactly when the stored decode fit is within
    ``DECODE_MEAN_BOUND`` mean and ``DECODE_WORST_BOUND`` worst-point relative error, else
    ``FAIL`` (exit 2), showing the stored figures."""
    lines = check.stdout.splitlines()
    decode = profile["decode_fit"]
    mean, worst = decode["mean_rel_error"], decode["worst_rel_error"]
    good = mean <= DECODE_MEAN_BOUND and worst <= DECODE_WORST_BOUND
    quality = [line for line in lines if "decode fit quality" in line]
    others = [line for line in lines if line.startswith(("ok", "FAIL")) and line not in quality]
    assert len(quality) == 1, check.brief()
    assert len(others) >= 5 and all(line.startswith("ok") for line in others), check.brief()
    assert quality[0].startswith("ok" if good else "FAIL"), (mean, worst, check.brief())
    assert f"mean relative error {mean:.1%}, worst {worst:.1%}" in quality[0]
    assert check.returncode == (0 if good else 2), check.brief()


class SuiteChecks:
    """The protocol truths; each variant module provides a module-scoped ``suite`` fixture."""

    # --- the profile -----------------------------------------------------------------------

    def test_profile_succeeds(self, suite: Suite) -> None:
        """narwhal-profile exits 0 and reports one profile (its own checks, e.g. prompt_tokens
        equal to the prompt sent on every request, all held)."""
        result = suite.profile.json()
        assert suite.profile.returncode == 0, suite.profile.brief()
        assert result["ok"] is True and result["profiles"] == 1, suite.profile.brief()

    def test_chunk_tokens_sum_to_the_usage_count(self, suite: Suite) -> None:
        """In the sidecar every decode stream's chunk token counts add up to --decode-tokens
        (what the usage chunk said), and every cohort of the sweep is there."""
        shape = suite.shape
        samples = suite.samples_doc()["decode_samples"]
        expected = len(shape.decode_input_lens) * len(shape.decode_concurrency)
        assert len(samples) == expected * shape.decode_repeats
        for cohort in samples:
            assert len(cohort["streams"]) == cohort["concurrency"]
            for stream in cohort["streams"]:
                assert len(stream["chunk_tokens"]) == len(stream["chunk_ns"])
                assert sum(stream["chunk_tokens"]) == shape.decode_tokens, (
                    f"stream {stream['request_id']}: chunk tokens {stream['chunk_tokens']} add up "
                    f"to {sum(stream['chunk_tokens'])}, the server generated {shape.decode_tokens}"
                )

    def test_engine_counted_what_the_profile_sent(self, suite: Suite) -> None:
        """vLLM's own counters over the sweep match the sidecar exactly: prompt tokens (the
        prompts were exact), generated tokens, inter-token intervals (one per token after the
        first of each decode stream), and the completion POSTs in the server's access log (the
        evidence the refusal tests rely on), the mixing points' streams and prefills included."""
        shape = suite.shape
        streams = decode_streams(suite)
        samples = suite.samples_doc()
        prefills = prefill_requests(suite)
        sweep_prompt = sum(
            length * len(p["ttft_s"])
            for p, length in ((p, p["length"]) for p in samples["prefill_samples"])
        ) + sum(c["input_len"] * c["concurrency"] for c in samples["decode_samples"])
        # the mixing points (--mixing): decode streams and one-token prefills injected beside them
        mixing = samples.get("mixing_samples", [])
        mixing_streams = [s for m in mixing for s in m["streams"]]
        injected = [p for m in mixing for p in m["prefills"]]
        sweep_prompt += sum(m["input_len"] * len(m["streams"]) for m in mixing)
        sweep_prompt += sum(m["prefill_len"] * len(m["prefills"]) for m in mixing)
        generated = delta(suite.before, suite.after, "vllm:generation_tokens_total")
        prompt = delta(suite.before, suite.after, "vllm:prompt_tokens_total")
        intervals = delta(suite.before, suite.after, "vllm:inter_token_latency_seconds_count")
        # One unscored warm-up request (one output token, a prompt of a prefill length).
        mixing_generated = sum(sum(s["chunk_tokens"]) for s in mixing_streams) + len(injected)
        assert generated == prefills + 1 + len(streams) * shape.decode_tokens + mixing_generated
        assert prompt - sweep_prompt in shape.prefill_lens, (prompt, sweep_prompt)
        assert intervals == sum(sum(s["chunk_tokens"]) - 1 for s in streams + mixing_streams)
        posts = prefills + 1 + len(streams) + len(mixing_streams) + len(injected)
        assert suite.posts[1] - suite.posts[0] == posts, suite.posts

    def test_max_model_len_from_tokenize_and_models(self, suite: Suite) -> None:
        """/tokenize and /v1/models both say 4096, and so do the profile and the workload."""
        url, headers = suite.server.url, suite.headers
        models = cmd.get_json(f"{url}/v1/models", headers)
        assert [m["max_model_len"] for m in models["data"]] == [MAX_MODEL_LEN]
        tokenized = cmd.post_json(f"{url}/tokenize", {"model": SERVED_MODEL, "prompt": "narwhal"})
        assert tokenized["max_model_len"] == MAX_MODEL_LEN
        assert suite.profile_doc()["engine"]["max_model_len"] == MAX_MODEL_LEN
        assert suite.workload_doc()["max_model_len"] == MAX_MODEL_LEN

    def test_prefix_caching_read_as_off(self, suite: Suite) -> None:
        """vllm:cache_config_info says enable_prefix_caching=False; check reads it from the
        engine's metrics, and the profile is bound to an attestation holding that label."""
        config = cmd.metrics(suite.server.url).cache_config()
        assert config is not None and config["enable_prefix_caching"] == "False"
        lines = suite.check.stdout.splitlines()
        assert any(
            line.startswith("ok") and "prefix caching off (metrics)" in line for line in lines
        ), suite.check.brief()
        assert suite.profile_doc()["binding"]["kind"] == "attestation"
        evidence = suite.samples_doc()["evidence"]
        for moment in ("before", "after"):
            assert evidence[moment]["cache_config"]["enable_prefix_caching"] == "False"

    def test_drain_gauges_exist(self, suite: Suite) -> None:
        """Both of vLLM's gauges are on /metrics, and the trial drained on exactly them."""
        page = cmd.metrics(suite.server.url)
        for gauge in DRAIN_GAUGES:
            assert page.sum(gauge) is not None, f"{gauge} missing from /metrics"
        manifest = cmd.read_json(suite.run_file("manifest.json"))
        assert manifest["limits"]["drain_gauges"] == list(DRAIN_GAUGES), suite.run.brief()
        assert len(cmd.read_json(suite.run_file("summary.json"))["drain_s"]) == 2

    # --- the trial -------------------------------------------------------------------------

    def test_trial_prepare_succeeds(self, suite: Suite) -> None:
        """prepare wrote a workload for the served model."""
        assert suite.prepare.returncode == 0, suite.prepare.brief()
        workload = suite.workload_doc()
        assert workload["model"] == SERVED_MODEL
        assert workload["input_tokens"] == suite.shape.trial_input
        assert workload["output_tokens"] == suite.shape.trial_output

    def test_trial_run_counts_tokens_exactly(self, suite: Suite) -> None:
        """Every request completed with the requested output tokens and the exact prompt
        tokens as the server counted them; no more chunks than tokens."""
        assert suite.run.returncode == 0, suite.run.brief()
        records = cmd.read_jsonl(suite.run_file("requests.jsonl"))
        assert len(records) == TRIAL_REQUESTS
        for record in records:
            assert record["status"] == "completed", record
            assert record["completion_tokens"] == suite.shape.trial_output, record
            assert record["prompt_tokens"] == suite.shape.trial_input, record
            assert 1 <= record["chunks"] <= record["completion_tokens"], record
        summary = cmd.read_json(suite.run_file("summary.json"))
        assert summary["counts"]["completed"] == TRIAL_REQUESTS
        assert summary["client_schedule_valid"] is True

    def test_trial_check_verdict(self, suite: Suite) -> None:
        """check passes the context limit, both profile domains and prefix caching (metrics and
        launch record); its decode-fit-quality item passes exactly when the stored decode fit is
        within the bounds ``check`` enforces (``DECODE_MEAN_BOUND`` mean, ``DECODE_WORST_BOUND``
        worst-point relative error), and FAILs (exit 2) otherwise, showing the stored figures.
        (How good the fit is depends on the machine's load: not asserted.)"""
        assert_check_verdict(suite.check, suite.profile_doc())

    # --- single requests -------------------------------------------------------------------

    def test_request_id_comes_back_as_cmpl_id(self, suite: Suite) -> None:
        """Every event of a stream sent with X-Request-Id R carries id cmpl-R."""
        request_id = f"conformance-{uuid.uuid4().hex[:12]}"
        ids = stream_ids(suite.server.url, request_id, suite.headers)
        assert len(ids) >= 2  # content chunks and the usage chunk
        assert set(ids) == {f"cmpl-{request_id}"}

    def test_prompt_tokens_exact_on_a_direct_stream(self, suite: Suite) -> None:
        """The engine client's record of a 300-token prompt says 300 prompt tokens, and its
        chunk counts add up to the usage count."""
        body = completion_body(
            model=SERVED_MODEL, prompt=list(range(100, 400)), max_tokens=12, return_token_ids=True
        )
        record = asyncio.run(
            _stream_record(suite.server.url, suite.api_key, body, f"conf-{uuid.uuid4().hex}")
        )
        assert record.error is None, record.error
        assert record.prompt_tokens == 300
        assert record.completion_tokens == 12 == sum(record.chunk_tokens)

    def test_overlong_prompt_error_body_is_parsed(self, suite: Suite) -> None:
        """A prompt longer than max_model_len: vLLM answers 400; the engine client records an
        EngineHTTPError with status 400 and exactly vLLM's message."""
        prompt = [100] * (MAX_MODEL_LEN + 10)
        status, doc = raw_error(
            suite.server.url,
            {"model": SERVED_MODEL, "prompt": prompt, "max_tokens": 4},
            suite.headers,
        )
        assert status == 400, doc
        message = doc["error"]["message"]
        assert f"maximum context length is {MAX_MODEL_LEN}" in message
        body = completion_body(model=SERVED_MODEL, prompt=prompt, max_tokens=4)
        record = asyncio.run(
            _stream_record(suite.server.url, suite.api_key, body, f"conf-{uuid.uuid4().hex}")
        )
        assert isinstance(record.error, EngineHTTPError), record.error
        assert record.error.status == 400 and record.http_status == 400
        assert record.error.message == message
        assert record.error.error_type == doc["error"]["type"]


class RefusalChecks:
    """A request that would not fit max_model_len is refused before anything is sent (vLLM 0.32
    would shorten it silently). Evidence: the server's access log shows no new completion."""

    def _sent(self, suite: Suite) -> int:
        return suite.server.count_in_log(COMPLETIONS_LOG)

    def test_prepare_refuses_a_shape_that_does_not_fit(self, suite: Suite) -> None:
        """prepare with 4090 + 16 tokens: a clear error, no folder, nothing sent."""
        sent = self._sent(suite)
        out = suite.root / "refused" / "prepare"
        done = cmd.trial(
            "prepare",
            "--base",
            suite.server.url,
            "--input-tokens",
            "4090",
            "--output-tokens",
            "16",
            "--seed",
            "1",
            "--out",
            str(out),
            env=suite.env,
        )
        suite.extra_done.append(done)
        assert done.returncode == 1, done.brief()  # a blocking error: prepare judges nothing
        assert "4090 input + 16 output tokens exceed the live max_model_len 4096" in done.stderr
        assert not out.exists()
        assert self._sent(suite) == sent, "prepare sent a completion"

    def test_run_and_check_refuse_a_workload_that_does_not_fit(self, suite: Suite) -> None:
        """A workload edited to 4090 + 16 tokens: run stops with a blocking error before any
        completion (exit 1), check FAILs the context limit (exit 2)."""
        workload = suite.workload_doc()
        workload["input_tokens"] = 4090
        folder = suite.root / "refused"
        folder.mkdir(mode=0o700, exist_ok=True)
        edited = folder / "workload-4090.json"
        edited.write_text(json.dumps(workload, sort_keys=True), encoding="utf-8")
        sent = self._sent(suite)
        run = cmd.trial(
            "run",
            "--base",
            suite.server.url,
            "--workload",
            str(edited),
            "--rate",
            "1",
            "--requests",
            "2",
            "--ttft",
            "60",
            "--tpot",
            "5",
            "--attainment",
            "1",
            "--out",
            str(folder / "run"),
            env=suite.env,
        )
        check = cmd.trial(
            "check",
            "--workload",
            str(edited),
            "--fleet",
            str(suite.fleet),
            "--profiles",
            str(suite.store),
            "--launch-record",
            str(suite.launch_record),
            env=suite.env,
        )
        suite.extra_done += [run, check]
        assert run.returncode == 1, run.brief()
        assert "exceed the live max_model_len 4096" in run.stderr, run.brief()
        assert check.returncode == 2, check.brief()
        assert any(
            line.startswith("FAIL") and "context limit" in line
            for line in check.stdout.splitlines()
        ), check.brief()
        assert self._sent(suite) == sent, "run sent a completion"

    def test_profile_drops_points_beyond_the_context(self, suite: Suite) -> None:
        """A decode input length whose prompt + output exceed 4096 is dropped in preflight; with
        too few points left the profiler aborts before measuring: nothing sent."""
        folder = suite.root / "refused" / "profile"
        fleet = cmd.write_fleet(
            folder,
            suite.server.url,
            iid="vllm-0",
            model=SERVED_MODEL,
            api_key_env=None,
        )
        sent = self._sent(suite)
        done = cmd.profile(
            "--fleet",
            fleet,
            "--prefill-lens",
            "128,256,512",
            "--decode-input-lens",
            "128,4090",
            "--decode-concurrency",
            "1,2",
            "--decode-tokens",
            "16",
            "--format",
            "json",
            env=suite.env,
        )
        suite.extra_done.append(done)
        result = done.json()
        assert done.returncode == 1, done.brief()
        assert result["ok"] is False and "too few sweep points" in result["error"]["message"]
        assert self._sent(suite) == sent, "the profiler sent a completion"
        assert not (folder / "profiles" / "fleet-profiles.json").exists()
