"""Pure pieces: tokenizer, latency model functions, fault patches, config resolution, metrics."""

from __future__ import annotations

import math

import pytest
from prometheus_client.parser import text_string_to_metric_families

from narwhal_sim import (
    BOS_ID,
    Faults,
    SimConfigError,
    decode,
    decode_step_s,
    encode,
    get_preset,
    idle_ttft_s,
    prefill_chunk_s,
    presets,
    tpot_s,
)
from narwhal_sim.engine._metrics import EngineStats, cache_config_labels, render_engine_metrics
from narwhal_sim.model._config import EngineSettings, resolve_engines
from narwhal_store import FleetConfig


def test_tokenizer_stable_and_invertible() -> None:
    """Words map to stable ids, long words split into pieces, encode(decode(ids)) == ids."""
    assert encode("alpha beta") == encode("alpha  beta")
    assert len(encode("a" * 13)) == 3  # pieces of at most 6 characters
    assert encode("x", add_special_tokens=True)[0] == BOS_ID
    ids = [256, 1000, 31999]
    assert encode(decode(ids)) == ids
    assert all(256 <= i < 32000 for i in encode("the quick brown fox jumps"))


def test_chunked_prefill_sums_to_model() -> None:
    """Summing chunk costs (+ step and API overheads) reproduces idle_ttft_s for 1 and 2 chunks."""
    p = get_preset()
    for length in (1024, 8192, 16384, 20000):
        chunks, done, total = 0, 0, p.api_overhead
        while done < length:
            take = min(p.max_num_batched_tokens, length - done)
            total += decode_step_s(p, 0, 0) + prefill_chunk_s(p, done, take)
            done += take
            chunks += 1
        assert chunks == math.ceil(length / p.max_num_batched_tokens)
        assert total == pytest.approx(idle_ttft_s(p, length), rel=1e-9)


def test_preset_numbers_are_plausible() -> None:
    """The default preset lands in the reference ranges (TTFT 1k/8k/16k, TPOT at 48 streams)."""
    p = get_preset()
    assert 0.030 <= idle_ttft_s(p, 1024) <= 0.050
    assert 0.190 <= idle_ttft_s(p, 8192) <= 0.260
    assert 0.440 <= idle_ttft_s(p, 16384) <= 0.540
    assert 0.0165 <= tpot_s(p, 48, 8192) <= 0.019
    assert {"h200-llama-3.1-8b", "h100-llama-3.1-8b", "tiny", "overloaded", "flat-5ms"} <= set(
        presets()
    )


def test_overloaded_preset_misses_slo() -> None:
    """Overloaded: decode stretched by the prefill duty passes 33 ms at 0.25 req/s, fails at 0.5."""
    p = get_preset("overloaded")

    def stretched_tpot(rate: float) -> float:
        duty = idle_ttft_s(p, 8192) * rate  # share of device time spent in 8192-token prefills
        return tpot_s(p, 4, 8192 + 64) / (1 - duty)

    # per engine: the example fleet's router spreads 0.5 / 1 req/s over two engines
    assert stretched_tpot(0.25) < 0.0333 < stretched_tpot(0.5)
    default = get_preset()
    assert tpot_s(default, 4, 8192 + 64) / (1 - idle_ttft_s(default, 8192)) < 0.0333


def test_fault_patch_merge_and_clear() -> None:
    """A patch sets faults, null clears them, bad values are refused."""
    f = Faults().merged(
        {"health_status": 503, "stall": True, "http_error": {"status": 429, "rate": 0.5}}
    )
    assert (
        f.health_status == 503 and f.stall and f.http_error is not None and f.http_error.rate == 0.5
    )
    g = f.merged({"health_status": None, "stall": None})
    assert g.health_status is None and g.stall is False and g.http_error == f.http_error
    with pytest.raises(SimConfigError):
        Faults().merged({"noise": -1})
    with pytest.raises(SimConfigError):
        Faults().merged({"tokenize_max_model_len": "absent"})


def _fleet(**entry: object) -> dict[str, object]:
    base = {"iid": "e", "url": "http://127.0.0.1:9001", "role": "mixed", **entry}
    return {
        "format": "narwhal.fleet",
        "format_version": 1,
        "profiles": {"path": "p.json"},
        "engines": [base],
    }


def _resolve(
    fleet: dict[str, object], sim: dict[str, object] | None, preset: str | None = None
) -> list[EngineSettings]:
    """resolve_engines on the fleet document as load_fleet validates it."""
    return resolve_engines(FleetConfig.model_validate(fleet), sim, preset=preset)


def test_config_precedence() -> None:
    """preset < engine_contract < sim defaults < sim engine; the version picks the API style."""
    fleet = _fleet(engine_contract={"model": "x", "max_model_len": 8192, "version": "0.11.0"})
    (s,) = _resolve(fleet, None)
    assert (s.served_model_name, s.max_model_len, s.api_style, s.max_model_len_policy) == (
        "x",
        8192,
        "0.11",
        "reject",
    )
    sim = {
        "format": "narwhal.sim",
        "format_version": 1,
        "defaults": {"max_model_len": 4096},
        "engines": {"e": {"version": "0.33.0", "preset": "tiny"}},
    }
    (t,) = _resolve(fleet, sim)
    assert (t.max_model_len, t.api_style, t.max_model_len_policy, t.preset.name) == (
        4096,
        "0.33",
        "clamp",
        "tiny",
    )
    two = _fleet()
    two["engines"] = [
        *two["engines"],
        {"iid": "f", "url": "http://127.0.0.1:9002", "role": "decode"},
    ]
    sim_two = {
        "format": "narwhal.sim",
        "format_version": 1,
        "defaults": {"preset": "h100-llama-3.1-8b"},
        "engines": {"f": {"preset": "tiny"}},
    }
    by_cli = _resolve(two, sim_two, preset="overloaded")
    assert [s.preset.name for s in by_cli] == ["overloaded", "tiny"]  # --preset beats defaults only
    assert [s.kv_transfer_s_per_token for s in by_cli] == [2.5e-6, 2.5e-6]  # the default
    (old,) = _resolve(_fleet(engine_contract={"version": "0.10.0"}), None)
    assert old.error_shape == "flat"


@pytest.mark.parametrize(
    "sim",
    [
        {"format": "narwhal.sim", "format_version": 1, "defaults": {"bogus": 1}},
        {"format": "narwhal.sim", "format_version": 1, "engines": {"other": {}}},
        {"format": "narwhal.sim", "format_version": 2},
        {"format": "narwhal.sim", "format_version": 1, "engines": {"e": {"preset": "nope"}}},
        {"format": "narwhal.sim", "format_version": 1, "defaults": {"kv_transfer_s_per_token": -1}},
        {
            "format": "narwhal.sim",
            "format_version": 1,
            "defaults": {"kv_transfer_s_per_token": "x"},
        },
    ],
)
def test_bad_sim_config_refused(sim: dict[str, object]) -> None:
    """Unknown keys, unknown iids, wrong versions and unknown presets are errors."""
    with pytest.raises(SimConfigError):
        _resolve(_fleet(), sim)


def test_metrics_text_parses() -> None:
    """The exposition parses with prometheus_client and has the vLLM families and labels."""
    stats = EngineStats()
    stats.ttft.observe(0.03)
    labels = cache_config_labels(
        api_style="0.33",
        block_size=16,
        num_gpu_blocks=100,
        prefix_caching=False,
        gpu_memory_utilization=0.9,
        kv_cache_tokens=1600,
        max_model_len=800,
    )
    text = render_engine_metrics(
        model_name="m",
        engine_index="0",
        running=2,
        waiting=1,
        kv_usage=0.5,
        cache_config=labels,
        start_time=1700000000.5,
        stats=stats,
    ).decode()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    waiting = families["vllm:num_requests_waiting"].samples[0]
    assert waiting.value == 1.0 and waiting.labels == {"model_name": "m", "engine": "0"}
    info = families["vllm:cache_config_info"].samples[0].labels
    assert info["kv_cache_size_tokens"] == "1600" and "model_name" not in info
    ttft = families["vllm:time_to_first_token_seconds"]
    assert [s.value for s in ttft.samples if s.name.endswith("_count")] == [1.0]
    assert families["vllm:prompt_tokens"].type == "counter"
