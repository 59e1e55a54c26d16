"""Units of the live sweep: kept points, prompts, evidence comparison, metrics verdicts, gates."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

import orjson
import pytest

from narwhal_engine_client import (
    EngineProtocolError,
    MetricsSnapshot,
    StreamCutError,
    StreamRecord,
    token_counting,
)
from narwhal_profile_cli._errors import ProfileAbortError
from narwhal_profile_cli._live import select_engines
from narwhal_profile_cli._options import RawOptions, validate
from narwhal_profile_cli._progress import Progress
from narwhal_profile_cli.results._result import CommandResult, emit, error_line
from narwhal_profile_cli.sweeps._decode import _send_skew
from narwhal_profile_cli.sweeps._evidence import check_unchanged, generation
from narwhal_profile_cli.sweeps._metrics_watch import MetricsWatch, Observation, observe
from narwhal_profile_cli.sweeps._prefill import PrefillTimings, fit_and_gate
from narwhal_profile_cli.sweeps._preflight import EngineProbe, check_points, kept_points
from narwhal_profile_cli.sweeps._prompts import MIN_POOL, UNIQUE_HEAD, PromptFactory, token_pool
from narwhal_profile_cli.sweeps._requests import prepare, verify
from narwhal_store import load_fleet

SWEEP = validate(RawOptions(fleet="f")).sweep


def test_kept_points_follow_max_model_len() -> None:
    """Prefill keeps L + 1 <= max_model_len; decode keeps L + decode_tokens <= max_model_len."""
    points = kept_points(SWEEP, 8192 + 64, None)
    assert points.prefill_lens == (256, 512, 1024, 2048, 4096, 8192)
    assert points.decode_input_lens == (512, 4096, 8192)
    assert kept_points(SWEEP, 8192 + 63, None).decode_input_lens == (512, 4096)
    assert kept_points(SWEEP, 8192, None).prefill_lens[-1] == 4096


@pytest.mark.parametrize(
    ("limit", "expected"),
    [(None, (1, 4, 16, 48)), (48, (1, 4, 16, 48)), (100, (1, 4, 16, 48)), (32, (1, 4, 16, 32)),
     (4, (1, 4)), (3, (1, 3)), (1, (1,))],
)  # fmt: skip
def test_limits_keep_points_and_add_the_limit(limit: int | None, expected: tuple[int, ...]) -> None:
    """Concurrencies above the limit are dropped and the limit is added when one exceeded it."""
    assert kept_points(SWEEP, 131072, limit).decode_concurrency == expected


def test_too_few_points_abort_names_engine_and_what_is_left() -> None:
    """Fewer than 3 prefill lengths, 2 input lengths or 2 concurrencies abort with exit 1."""
    points = kept_points(SWEEP, 1500, 1)
    with pytest.raises(ProfileAbortError) as caught:
        check_points("e0", SWEEP, points, 1500)
    message = caught.value.message
    assert caught.value.exit_code == 1 and caught.value.engine == "e0"
    assert "engine e0: engine limits leave too few sweep points" in message
    assert "prefill length" not in message  # 256, 512 and 1024 fit: enough
    assert "1 decode input length(s) [512]" in message
    assert "1 decode concurrency level(s) [1]" in message


def test_prompts_have_exact_length_and_distinct_heads() -> None:
    """Every prompt has the exact length asked for, ids from the pool and a head of its own."""
    pool = token_pool(list(range(1000, 1000 + MIN_POOL)) * 2)
    assert len(pool) == MIN_POOL
    factory = PromptFactory(pool, seed=7)
    prompts = [factory.prompt(n) for n in (1, 5, 16, 256, 256, 4096) for _ in range(20)]
    assert [len(p) for p in prompts] == [n for n in (1, 5, 16, 256, 256, 4096) for _ in range(20)]
    assert all(set(p) <= set(pool) for p in prompts)
    heads = [tuple(p[:UNIQUE_HEAD]) for p in prompts if len(p) >= UNIQUE_HEAD]
    assert len(set(heads)) == len(heads)
    assert PromptFactory(pool, seed=7).prompt(64) == PromptFactory(pool, seed=7).prompt(64)
    with pytest.raises(ValueError, match="at least"):
        PromptFactory(pool[:-1], seed=1)


IDENTITY = {
    "url": "http://127.0.0.1:8000",
    "model": "m",
    "root": "m",
    "max_model_len": 16384,
    "version": "0.11.0",
    "process_start_time_seconds": 1700000000.0,
}


def test_unchanged_evidence_passes_and_restart_aborts() -> None:
    """The same evidence passes; a new process start time aborts as a restart naming the engine."""
    check_unchanged("e0", IDENTITY, dict(IDENTITY))
    with pytest.raises(ProfileAbortError) as caught:
        check_unchanged("e0", IDENTITY, {**IDENTITY, "process_start_time_seconds": 1700000100.0})
    assert caught.value.code == "generation_changed"
    assert "engine e0: the engine restarted during its sweep" in caught.value.message
    with pytest.raises(ProfileAbortError, match="live facts changed"):
        check_unchanged("e0", IDENTITY, {**IDENTITY, "version": "0.12.0"})


def test_generation_ignores_attestation_extras() -> None:
    """The generation of an attestation is that of its identity facts."""
    attestation = {**IDENTITY, "cache_config": {"block_size": "16"}, "contract": {"version": "x"}}
    assert generation(attestation) == generation(IDENTITY)


def _watch(observations: list[Observation]) -> MetricsWatch:
    watch = MetricsWatch(client=None, clock_ns=lambda: 0)  # type: ignore[arg-type]
    watch.observations.extend(observations)
    return watch


def test_ctrl_c_while_the_metrics_watch_closes_is_not_swallowed() -> None:
    """A cancellation (Ctrl-C) that reaches the sweep while the watch stops its poller goes on;
    swallowing it let a loaded machine's sweep run to the end and exit 0 after Ctrl-C."""

    async def scenario() -> bool:
        watch = _watch([])

        async def poller() -> None:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                await asyncio.sleep(0.01)  # dies slowly, as a poller mid-request does
                raise

        watch._task = asyncio.create_task(poller())
        await asyncio.sleep(0)
        closing = asyncio.create_task(watch.__aexit__(RuntimeError, RuntimeError("x"), None))
        await asyncio.sleep(0)  # closing now awaits the poller
        closing.cancel()
        await asyncio.gather(closing, return_exceptions=True)
        return closing.cancelled()

    assert asyncio.run(scenario())


def test_metrics_verdicts_look_inside_the_window() -> None:
    """Waiting requests or a full KV cache count only inside the window; preemptions anywhere."""
    quiet = [Observation(t, 0.0, 4.0, 0.2, 0.0) for t in (0, 50, 100)]
    assert _watch(quiet).problems(10, 90) == []
    ramp = [Observation(5, 3.0, 1.0, 0.1, 0.0), *quiet]
    assert _watch(ramp).problems(10, 90) == []  # queued before the window opened
    waiting = [*quiet, Observation(60, 2.0, 4.0, 0.5, 0.0)]
    assert "2 waiting request(s)" in _watch(waiting).problems(10, 90)[0]
    late = [*quiet, Observation(30, 3.0, 1.0, 0.1, 0.0, sent_ns=5)]  # asked before, read late
    assert _watch(late).problems(10, 90) == []
    full = [*quiet, Observation(60, 0.0, 4.0, 1.0, 0.0)]
    assert "KV cache was exhausted" in _watch(full).problems(10, 90)[0]
    preempted = [Observation(0, 0.0, 0.0, 0.0, 1.0), Observation(200, 0.0, 0.0, 0.0, 3.0)]
    assert "preempted 2 request(s)" in _watch(preempted).problems(10, 90)[0]


def _timings(values: dict[int, float]) -> list[PrefillTimings]:
    return [PrefillTimings(n, [v, v * 1.01, v * 0.99], ["a", "b", "c"]) for n, v in values.items()]


def test_prefill_gate_passes_a_quadratic() -> None:
    """Medians on a quadratic pass the gates and fit it closely."""
    model = {n: 0.013 + 1.9e-5 * n + 5.1e-10 * n * n for n in (256, 1024, 4096, 16384)}
    fit = fit_and_gate("e0", _timings(model))
    assert fit.mean_rel_error < 0.05


def test_prefill_gates_abort_with_the_references_wording() -> None:
    """One wild point fails only the worst-point gate; an even zigzag fails only the mean gate."""
    lengths = (256, 512, 1024, 2048, 4096, 8192, 12288, 16384)
    wild = {n: 0.01 + 1e-5 * n for n in lengths}
    wild[512] = 0.2
    with pytest.raises(ProfileAbortError) as caught:
        fit_and_gate("e0", _timings(wild))
    assert caught.value.message.startswith(
        "engine e0: the representative prefill fit exceeds 50% worst-point error ("
    )
    assert (caught.value.code, caught.value.exit_code) == ("prefill_worst_error", 1)
    zigzag = {n: (0.01 + 1e-5 * n) * (1.4 if i % 2 else 1 / 1.4) for i, n in enumerate(lengths)}
    with pytest.raises(ProfileAbortError) as caught:
        fit_and_gate("e1", _timings(zigzag))
    assert caught.value.message.startswith(
        "engine e1: the representative prefill fit exceeds 20% mean error ("
    )
    assert (caught.value.code, caught.value.exit_code) == ("prefill_mean_error", 1)


def test_progress_only_on_a_terminal() -> None:
    """Progress writes nothing unless enabled; when enabled it shows engine, phase, point, ETA."""
    silent = io.StringIO()
    quiet = Progress(silent, enabled=False)
    quiet.add_work(10)
    quiet.update("e0", "prefill", "L=256", done=1)
    quiet.close()
    assert silent.getvalue() == ""
    assert not Progress.for_stream(io.StringIO()).enabled
    ticks = iter(range(0, 10**12, 10**9))
    shown = io.StringIO()
    loud = Progress(shown, enabled=True, clock_ns=lambda: next(ticks))
    loud.add_work(4)
    loud.update("e0", "prefill", "L=256 repeat 1/3", done=1)
    loud.close()
    assert "e0 · prefill · L=256 repeat 1/3 · ETA 3s" in shown.getvalue()


def test_result_rendering() -> None:
    """Text success lines per mode; errors are one line naming the engine."""
    out, err = io.StringIO(), io.StringIO()
    ok = CommandResult(mode="live", profiles=2, path=Path("p.json"))
    assert emit(ok, "text", stdout=out, stderr=err) == 0
    assert out.getvalue() == "wrote 2 profile(s) to p.json\n"
    failure = ProfileAbortError("/health failed", engine="e0")
    assert error_line(failure) == "narwhal-profile: error: engine e0: /health failed"


def _probe(version: str | None = "0.11.0") -> EngineProbe:
    counting = token_counting(version)
    pool = tuple(range(100))
    return EngineProbe("e0", None, "m", 1000, pool, version, counting)  # type: ignore[arg-type]


def test_prepare_checks_input_plus_output_fits() -> None:
    """A completion whose input plus requested output exceeds max_model_len is never sent."""
    request = prepare(_probe(), [5] * 990, 10, "r1")
    body = orjson.loads(request.body)
    assert (body["max_tokens"], body["min_tokens"], len(body["prompt"])) == (10, 10, 990)
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["return_token_ids"] is True  # vLLM >= 0.10.2 counts tokens per chunk by ids
    with pytest.raises(ProfileAbortError, match="does not fit the live max_model_len 1000"):
        prepare(_probe(), [5] * 991, 10, "r2")


@pytest.mark.parametrize(
    ("version", "token_ids", "continuous"),
    [("0.33.0", True, False), ("0.9.2", False, True), (None, True, True)],
)
def test_prepare_asks_for_per_chunk_counts_the_engine_supports(
    version: str | None, token_ids: bool, continuous: bool
) -> None:
    """return_token_ids from 0.10.2, continuous usage before it, both for an unknown version."""
    body = orjson.loads(prepare(_probe(version), [5] * 10, 4, "r").body)
    assert body.get("return_token_ids", False) is token_ids
    assert body["stream_options"].get("continuous_usage_stats", False) is continuous


def test_verify_refuses_chunks_without_token_counts() -> None:
    """A stream whose chunks carried no count aborts naming the engine version; never a TPOT."""
    request = prepare(_probe("0.9.2"), [1, 2, 3, 4], 2, "r1")
    with pytest.raises(ProfileAbortError) as caught:
        verify(_probe("0.9.2"), request, _record(uncounted_chunks=2))
    assert caught.value.code == "token_counts" and caught.value.exit_code == 1
    assert "engine e0 (vLLM 0.9.2)" in caught.value.message
    assert "stream_options.continuous_usage_stats" in caught.value.message


def _record(**changes: object) -> StreamRecord:
    record = StreamRecord(
        request_id="r1",
        send_ns=0,
        chunk_ns=[10, 20],
        chunk_tokens=[1, 1],
        end_ns=30,
        http_status=200,
        prompt_tokens=4,
        completion_tokens=2,
    )
    for key, value in changes.items():
        setattr(record, key, value)
    return record


def test_verify_compares_usage_with_what_was_sent() -> None:
    """usage.prompt_tokens and completion tokens must equal what was sent and asked for."""
    request = prepare(_probe(), [1, 2, 3, 4], 2, "r1")
    verify(_probe(), request, _record())
    with pytest.raises(
        ProfileAbortError, match=r"sent 4 prompt tokens but usage\.prompt_tokens is 5"
    ):
        verify(_probe(), request, _record(prompt_tokens=5))
    with pytest.raises(ProfileAbortError, match="asked for 2 output tokens"):
        verify(_probe(), request, _record(completion_tokens=1))
    with pytest.raises(ProfileAbortError, match="request r1 failed"):
        verify(_probe(), request, _record(error=StreamCutError("cut"), end_ns=None))
    mismatch = EngineProtocolError("its 2 content chunks carried 2 tokens but usage... is 3")
    with pytest.raises(ProfileAbortError, match="carried 2 tokens"):
        verify(_probe(), request, _record(error=mismatch))


def test_observe_reads_gauges_and_the_preemption_counter() -> None:
    """Waiting is summed over engines, KV usage is the largest, preemptions read by `_total`."""
    page = (
        "# TYPE vllm:num_requests_waiting gauge\n"
        'vllm:num_requests_waiting{engine="0"} 1\n'
        'vllm:num_requests_waiting{engine="1"} 2\n'
        "# TYPE vllm:kv_cache_usage_perc gauge\n"
        'vllm:kv_cache_usage_perc{engine="0"} 0.5\n'
        'vllm:kv_cache_usage_perc{engine="1"} 0.75\n'
        "# TYPE vllm:num_preemptions counter\n"
        'vllm:num_preemptions_total{engine="0"} 3\n'
    )
    seen = observe(MetricsSnapshot.from_text(page), 7)
    assert (seen.t_ns, seen.waiting, seen.kv_usage, seen.preemptions) == (7, 3.0, 0.75, 3.0)


def test_only_selection_names_what_matched_nothing(tmp_path: Path) -> None:
    """--only keeps fleet order; an unknown value aborts (exit 1) with wording fitting the case."""
    fleet_path = tmp_path / "fleet.json"
    engines = [{"iid": iid, "url": "http://127.0.0.1:9", "role": "mixed"} for iid in ("a", "b")]
    fleet_path.write_bytes(
        orjson.dumps(
            {
                "format": "narwhal.fleet",
                "format_version": 1,
                "profiles": {"path": "p.json"},
                "engines": engines,
            }
        )
    )
    fleet = load_fleet(fleet_path)
    assert [e.iid for e in select_engines(fleet, ("b", "a"))] == ["a", "b"]
    with pytest.raises(ProfileAbortError) as none:
        select_engines(fleet, ("x",))
    assert none.value.exit_code == 1 and none.value.code == "no_engines"
    assert none.value.message.startswith("the --only selection matches zero configured engines")
    with pytest.raises(ProfileAbortError) as some:
        select_engines(fleet, ("a", "x"))
    assert some.value.exit_code == 1
    assert some.value.message.startswith("--only 'x' matches no configured engine")


def test_running_out_of_distinct_short_prompts_is_an_abort_not_a_crash() -> None:
    """One-token prompts run out after as many prompts as the pool has ids: a clean abort."""
    pool = tuple(range(100, 100 + MIN_POOL))
    factory = PromptFactory(pool, seed=3)
    drawn = set()
    with pytest.raises(ProfileAbortError, match="use longer prompt lengths") as caught:
        for _ in range(10 * MIN_POOL):
            drawn.add(tuple(factory.prompt(1)))
    assert caught.value.exit_code == 1 and caught.value.code == "prompts_exhausted"
    assert len(drawn) <= MIN_POOL


def test_a_cohort_sent_far_apart_names_the_send_skew() -> None:
    """Streams the client started 1.2 s apart: the reason says so (more tokens would not help)."""

    def rec(send_ms: float) -> StreamRecord:
        send = int(send_ms * 1e6)
        return StreamRecord(
            "r", send, chunk_ns=[send + 10**6, send + 400 * 10**6], chunk_tokens=[1, 1]
        )

    together = [rec(0.0), rec(0.5), rec(1.0)]
    assert _send_skew(together) is None
    apart = [rec(0.0), rec(1246.2), rec(1246.6)]
    reason = _send_skew(apart)
    assert reason is not None and "sent the 3 streams 1246.6 ms apart" in reason
