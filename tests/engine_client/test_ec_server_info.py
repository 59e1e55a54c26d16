"""EngineClient.scheduler_config: vLLM's development endpoint ``/server_info`` (0.32 nesting)."""

from __future__ import annotations

import copy
from typing import Any

import httpx
import pytest
import respx

from narwhal_engine_client import EngineClient, EngineHTTPError, SchedulerConfig

BASE = "http://engine.test"

#: ``GET /server_info?config_format=json`` of vLLM 0.32 (``VLLM_SERVER_DEV_MODE=1``), trimmed: the
#: top level and ``scheduler_config`` as pydantic dumps them (every field of 0.32's
#: SchedulerConfig), the other configs cut to a few fields.
SERVER_INFO_032: dict[str, Any] = {
    "vllm_config": {
        "model_config": {
            "model": "Qwen/Qwen2.5-0.5B-Instruct",
            "runner": "auto",
            "tokenizer": "Qwen/Qwen2.5-0.5B-Instruct",
            "dtype": "torch.bfloat16",
            "max_model_len": 4096,
            "served_model_name": "qwen",
        },
        "cache_config": {
            "block_size": 128,
            "user_specified_block_size": False,
            "gpu_memory_utilization": 0.92,
            "cache_dtype": "auto",
            "enable_prefix_caching": True,
            "num_gpu_blocks": None,
            "kv_offloading_backend": "native",
        },
        "parallel_config": {"pipeline_parallel_size": 1, "tensor_parallel_size": 1},
        "scheduler_config": {
            "runner_type": "generate",
            "max_num_batched_tokens": 2048,
            "max_num_scheduled_tokens": None,
            "max_num_seqs": 128,
            "max_num_active_seqs": None,
            "long_prefill_token_threshold": 0,
            "long_prefill_token_threshold_adaptive": False,
            "max_num_queued_reqs": None,
            "max_num_queued_tokens": None,
            "enable_chunked_prefill": True,
            "is_multimodal_model": False,
            "max_num_encoder_input_tokens": 2048,
            "encoder_cache_size": 2048,
            "policy": "fcfs",
            "disable_chunked_mm_input": False,
            "scheduler_cls": None,
            "disable_hybrid_kv_cache_manager": False,
            "scheduler_reserve_full_isl": True,
            "watermark": 0.0,
            "prefill_schedule_interval": 1,
            "async_scheduling": False,
            "stream_interval": 1,
        },
        "speculative_config": None,
        "lora_config": None,
        "instance_id": "",
    },
    "vllm_env": {"VLLM_SERVER_DEV_MODE": True, "VLLM_HTTP_TIMEOUT_KEEP_ALIVE": 5},
    "system_env": {"torch_version": "2.9.0+cpu", "os": "Ubuntu 24.04 LTS (x86_64)"},
}


def _info(**scheduler: Any) -> dict[str, Any]:
    """The 0.32 body with ``scheduler`` changed in its ``scheduler_config``."""
    doc = copy.deepcopy(SERVER_INFO_032)
    doc["vllm_config"]["scheduler_config"].update(scheduler)
    return doc


async def _read(response: httpx.Response) -> SchedulerConfig | None:
    with respx.mock(base_url=BASE) as mock:
        route = mock.get("/server_info", params={"config_format": "json"}).mock(
            return_value=response
        )
        async with EngineClient(BASE) as client:
            shown = await client.scheduler_config()
    assert route.call_count == 1
    return shown


async def test_reads_the_scheduler_config_of_vllm_032() -> None:
    """Budget, running-sequence cap and chunked prefill from vllm_config.scheduler_config."""
    shown = await _read(httpx.Response(200, json=SERVER_INFO_032))
    assert shown == SchedulerConfig(
        max_num_batched_tokens=2048, max_num_seqs=128, enable_chunked_prefill=True
    )


async def test_chunked_prefill_off_and_other_budgets() -> None:
    """Values other than the defaults come through as shown."""
    body = _info(max_num_batched_tokens=8192, max_num_seqs=8, enable_chunked_prefill=False)
    assert await _read(httpx.Response(200, json=body)) == SchedulerConfig(8192, 8, False)


async def test_404_without_dev_mode_is_none() -> None:
    """Without VLLM_SERVER_DEV_MODE=1 the path is FastAPI's 404: None, no error."""
    assert await _read(httpx.Response(404, json={"detail": "Not Found"})) is None


@pytest.mark.parametrize(
    "body",
    [
        b"<html>not json</html>",
        b"[1, 2]",
        b'{"vllm_config": "model=\'qwen\', speculative_config=None, max_seq_len=4096"}',
        b'{"vllm_config": {"cache_config": {"block_size": 16}}}',
        b'{"vllm_config": {"scheduler_config": "SchedulerConfig(...)"}}',
        b'{"vllm_config": {"scheduler_config": {"policy": "fcfs"}}}',
        b"{}",
    ],
    ids=[
        "not-json",
        "list",
        "text-format",
        "no-scheduler",
        "scheduler-string",
        "none-of-three",
        "empty",
    ],
)
async def test_no_scheduler_config_is_none(body: bytes) -> None:
    """A body that is not JSON or holds no scheduler configuration gives None, no error."""
    assert await _read(httpx.Response(200, content=body)) is None


async def test_settings_of_the_wrong_type_are_left_out() -> None:
    """A setting that is not a positive integer (or not a boolean) is None; the others stay."""
    body = _info(max_num_batched_tokens="2048", max_num_seqs=0, enable_chunked_prefill=1)
    assert await _read(httpx.Response(200, json=body)) is None
    body = _info(max_num_batched_tokens=True, max_num_seqs=64, enable_chunked_prefill="true")
    assert await _read(httpx.Response(200, json=body)) == SchedulerConfig(None, 64, None)


async def test_other_statuses_are_http_errors() -> None:
    """A status other than 200 and 404 is an EngineHTTPError with the URL asked."""
    with pytest.raises(EngineHTTPError) as caught:
        await _read(httpx.Response(500, json={"detail": "boom"}))
    assert caught.value.status == 500
    assert caught.value.url == BASE + "/server_info?config_format=json"
