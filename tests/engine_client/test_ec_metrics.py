"""MetricsSnapshot parsing of a vLLM-like /metrics page, and EngineClient.metrics()."""

from __future__ import annotations

import httpx
import pytest
import respx

from narwhal_engine_client import (
    EngineClient,
    EngineHTTPError,
    EngineProtocolError,
    MetricsSnapshot,
)

BASE = "http://engine.test"

PAGE = """\
# HELP python_gc_objects_collected_total Objects collected during gc
# TYPE python_gc_objects_collected_total counter
python_gc_objects_collected_total{generation="0"} 12345.0
python_gc_objects_collected_total{generation="1"} 678.0
# HELP python_info Python platform information
# TYPE python_info gauge
python_info{implementation="CPython",major="3",minor="12",patchlevel="3",version="3.12.3"} 1.0
# HELP process_virtual_memory_bytes Virtual memory size in bytes.
# TYPE process_virtual_memory_bytes gauge
process_virtual_memory_bytes 4.2311311e+10
# HELP process_start_time_seconds Start time of the process since unix epoch in seconds.
# TYPE process_start_time_seconds gauge
process_start_time_seconds 1.76451234567e+09
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="llama"} 3.0
vllm:num_requests_running{engine="1",model_name="llama"} 2.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="llama"} 0.0
vllm:num_requests_waiting{engine="1",model_name="llama"} 4.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="llama"} 0.4375
# HELP vllm:prompt_tokens_total Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0",model_name="llama"} 40960.0
# HELP vllm:prompt_tokens_created Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_created gauge
vllm:prompt_tokens_created{engine="0",model_name="llama"} 1.7645123e+09
# HELP vllm:request_success_total Count of successfully processed requests.
# TYPE vllm:request_success_total counter
vllm:request_success_total{engine="0",finished_reason="stop",model_name="llama"} 1.0
vllm:request_success_total{engine="0",finished_reason="length",model_name="llama"} 9.0
vllm:request_success_total{engine="0",finished_reason="abort",model_name="llama"} 0.0
# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.001",model_name="llama"} 0.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.04",model_name="llama"} 6.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="llama"} 10.0
vllm:time_to_first_token_seconds_count{engine="0",model_name="llama"} 10.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="llama"} 0.5125
# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",cache_dtype="auto",calculate_kv_scales="False",cpu_offload_gb="0",enable_prefix_caching="False",engine="0",gpu_memory_utilization="0.9",is_attention_free="False",num_cpu_blocks="None",num_gpu_blocks="27893",num_gpu_blocks_override="None",prefix_caching_hash_algo="sha256",sliding_window="None",swap_space="4"} 1.0
# HELP http_requests_total Total number of requests by method, status and handler.
# TYPE http_requests_total counter
http_requests_total{handler="/v1/completions",method="POST",status="2xx"} 10.0
"""  # noqa: E501 - real exposition lines are long


def test_gauges_by_labels_and_sum():
    """value() matches labels, sum() adds every label set, absent names give None."""
    snap = MetricsSnapshot.from_text(PAGE)
    assert snap.value("vllm:num_requests_running") == 3.0
    assert snap.value("vllm:num_requests_running", engine="1") == 2.0
    assert snap.value("vllm:num_requests_running", engine="1", model_name="llama") == 2.0
    assert snap.value("vllm:num_requests_running", engine="7") is None
    assert snap.sum("vllm:num_requests_running") == 5.0
    assert snap.sum("vllm:num_requests_waiting") == 4.0
    assert snap.value("vllm:kv_cache_usage_perc") == 0.4375
    assert snap.sum("narwhal_router_admission_queue_depth") is None
    assert snap.value("narwhal_router_admission_queue_depth") is None


def test_counters_and_histograms():
    """Counters are found by sample name or family name; histogram samples keep their suffixes."""
    snap = MetricsSnapshot.from_text(PAGE)
    assert snap.value("vllm:prompt_tokens_total") == 40960.0
    assert snap.value("vllm:prompt_tokens") == 40960.0
    assert snap.value("vllm:request_success_total", finished_reason="length") == 9.0
    assert snap.sum("vllm:request_success_total") == 10.0
    assert snap.value("vllm:time_to_first_token_seconds_bucket", le="0.04") == 6.0
    assert snap.value("vllm:time_to_first_token_seconds_count") == 10.0
    assert snap.families["vllm:time_to_first_token_seconds"].type == "histogram"
    assert snap.families["vllm:prompt_tokens"].type == "counter"


def test_cache_config_and_process_start():
    """cache_config() returns every label (engine included); process start time is read."""
    snap = MetricsSnapshot.from_text(PAGE)
    config = snap.cache_config()
    assert config is not None
    assert config["block_size"] == "16"
    assert config["enable_prefix_caching"] == "False"
    assert config["num_gpu_blocks"] == "27893"
    assert config["engine"] == "0"
    assert len(config) == 14
    assert snap.process_start_time_seconds == pytest.approx(1764512345.67)


@pytest.mark.parametrize("type_line", ["# TYPE vllm:cache_config_info info\n", ""])
def test_cache_config_info_typed_or_untyped(type_line):
    """The cache_config labels are found whether the page types the family info or not at all."""
    page = type_line + 'vllm:cache_config_info{block_size="32",enable_prefix_caching="True"} 1.0\n'
    snap = MetricsSnapshot.from_text(page)
    assert snap.cache_config() == {"block_size": "32", "enable_prefix_caching": "True"}
    assert snap.process_start_time_seconds is None


def test_missing_cache_config_is_none():
    """A page without vllm:cache_config_info (e.g. --disable-log-stats) gives None."""
    assert MetricsSnapshot.from_text("process_start_time_seconds 5\n").cache_config() is None


def test_garbage_page_is_protocol_error():
    """Text that is not Prometheus exposition raises EngineProtocolError."""
    with pytest.raises(EngineProtocolError):
        MetricsSnapshot.from_text('vllm:x{engine="0" 1.0\n')


async def test_client_metrics_endpoint():
    """metrics() fetches /metrics and parses it; a 500 raises EngineHTTPError."""
    with respx.mock(base_url=BASE) as mock:
        mock.get("/metrics").mock(
            side_effect=[
                httpx.Response(
                    200, text=PAGE, headers={"content-type": "text/plain; version=0.0.4"}
                ),
                httpx.Response(500, text="Internal Server Error"),
            ]
        )
        async with EngineClient(BASE) as client:
            snap = await client.metrics()
            with pytest.raises(EngineHTTPError) as info:
                await client.metrics()
    assert snap.sum("vllm:num_requests_running") == 5.0
    assert info.value.status == 500
    assert info.value.message == "Internal Server Error"


def test_named_families_parse_alone_with_the_same_values():
    """``names`` parses only the families of those names (a cohort's closing reading
    is read while the engine idles), with exactly the values of a full parse; a counter is
    found by its family or ``_total`` name, and the rest of the page is not there."""
    watched = ("vllm:num_requests_waiting", "vllm:kv_cache_usage_perc", "vllm:prompt_tokens_total")
    full = MetricsSnapshot.from_text(PAGE)
    some = MetricsSnapshot.from_text(PAGE, names=watched)
    assert set(some.families) == {
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
        "vllm:prompt_tokens",
        "vllm:prompt_tokens_created",
    }
    for name in ("vllm:num_requests_waiting", "vllm:kv_cache_usage_perc", "vllm:prompt_tokens"):
        assert some.sum(name) == full.sum(name) is not None
    assert some.families["vllm:prompt_tokens"].type == "counter"
    assert some.sum("vllm:num_requests_running") is None
    assert some.cache_config() is None
    assert some.process_start_time_seconds is None
    histogram = MetricsSnapshot.from_text(PAGE, names=["vllm:time_to_first_token_seconds"])
    assert histogram.value("vllm:time_to_first_token_seconds_bucket", le="0.04") == 6.0
    assert histogram.value("vllm:time_to_first_token_seconds_count") == 10.0


async def test_client_metrics_can_ask_for_named_families():
    """metrics(names=...) reads the same page and keeps only those families."""
    with respx.mock(base_url=BASE) as mock:
        mock.get("/metrics").mock(return_value=httpx.Response(200, text=PAGE))
        async with EngineClient(BASE) as client:
            snap = await client.metrics(names=["vllm:num_requests_running"])
    assert list(snap.families) == ["vllm:num_requests_running"]
    assert snap.sum("vllm:num_requests_running") == 5.0
