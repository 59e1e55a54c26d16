"""The engine's scheduler configuration, from vLLM's development endpoint ``/server_info``.

vLLM shows its scheduler settings nowhere else: ``/metrics`` carries only ``vllm:cache_config_info``
and ``/version`` only the version. ``GET /server_info?config_format=json`` exists only when the
server runs with ``VLLM_SERVER_DEV_MODE=1`` (a 404 otherwise) and answers (vLLM 0.32)::

    {"vllm_config": {"model_config": {...}, "cache_config": {"block_size": 16, ...},
                     "scheduler_config": {"max_num_batched_tokens": 2048, "max_num_seqs": 128,
                                          "enable_chunked_prefill": true, ...}, ...},
     "vllm_env": {"VLLM_SERVER_DEV_MODE": true, ...}, "system_env": {...}}

``vllm_config`` is pydantic's JSON dump of ``VllmConfig`` (with ``config_format=text``, the
default, or a version without the parameter: its ``str()``, which this does not parse).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from narwhal_engine_client._replies import is_int

SERVER_INFO_PATH = "/server_info?config_format=json"


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    """What the engine's ``scheduler_config`` shows: each setting, or None when it is missing or
    not of its type (a positive integer; a boolean)."""

    max_num_batched_tokens: int | None
    max_num_seqs: int | None
    enable_chunked_prefill: bool | None


def _positive(value: Any) -> int | None:
    return int(value) if is_int(value) and value > 0 else None


def parse_server_info(content: bytes) -> SchedulerConfig | None:
    """The scheduler settings in a ``/server_info?config_format=json`` body, or None when the body
    is not JSON, has no ``vllm_config.scheduler_config`` object, or shows none of the three."""
    try:
        doc = json.loads(content)
    except ValueError:
        return None
    config = doc.get("vllm_config") if isinstance(doc, dict) else None
    scheduler = config.get("scheduler_config") if isinstance(config, dict) else None
    if not isinstance(scheduler, dict):
        return None
    chunked = scheduler.get("enable_chunked_prefill")
    shown = SchedulerConfig(
        max_num_batched_tokens=_positive(scheduler.get("max_num_batched_tokens")),
        max_num_seqs=_positive(scheduler.get("max_num_seqs")),
        enable_chunked_prefill=chunked if isinstance(chunked, bool) else None,
    )
    if shown == SchedulerConfig(None, None, None):
        return None
    return shown
