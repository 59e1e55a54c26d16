"""Prometheus text exposition of one engine's vLLM metrics (names, labels and buckets as vLLM)."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from narwhal_sim.model._timings import RequestTimings

# vLLM's buckets (vllm/v1/metrics/loggers.py); E2E_BUCKETS are its request-latency buckets
# fmt: off
TTFT_BUCKETS = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
    1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)
ITL_BUCKETS = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75,
    1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
)
E2E_BUCKETS = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0,
    30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0,
)
# fmt: on


@dataclass(slots=True)
class Histogram:
    """A Prometheus histogram (per-bucket counts kept non-cumulative)."""

    bounds: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    total: float = 0.0
    n: int = 0

    def __post_init__(self) -> None:
        self.counts = [0] * (len(self.bounds) + 1)

    def observe(self, value: float) -> None:
        """Add one observation of ``value``."""
        self.counts[bisect_left(self.bounds, value)] += 1
        self.total += value
        self.n += 1


@dataclass(slots=True)
class EngineStats:
    """Counters and histograms of one engine (reset by a restart)."""

    ttft: Histogram = field(default_factory=lambda: Histogram(TTFT_BUCKETS))
    itl: Histogram = field(default_factory=lambda: Histogram(ITL_BUCKETS))
    e2e: Histogram = field(default_factory=lambda: Histogram(E2E_BUCKETS))
    # per finished request (vLLM's request-latency buckets; time per output token: ITL's)
    queue: Histogram = field(default_factory=lambda: Histogram(E2E_BUCKETS))
    prefill: Histogram = field(default_factory=lambda: Histogram(E2E_BUCKETS))
    decode: Histogram = field(default_factory=lambda: Histogram(E2E_BUCKETS))
    inference: Histogram = field(default_factory=lambda: Histogram(E2E_BUCKETS))
    tpot: Histogram = field(default_factory=lambda: Histogram(ITL_BUCKETS))
    prompt_tokens: int = 0
    generation_tokens: int = 0
    success: dict[str, int] = field(default_factory=lambda: {"stop": 0, "length": 0, "abort": 0})

    def observe_finished(self, t: RequestTimings) -> None:
        """A request that finished normally: e2e and the per-request phase histograms."""
        self.e2e.observe(t.e2e_s)
        self.queue.observe(t.queue_s)
        self.prefill.observe(t.prefill_s)
        self.decode.observe(t.decode_s)
        self.inference.observe(t.inference_s)
        self.tpot.observe(t.tpot_s)

    def histograms(self) -> tuple[tuple[str, str, Histogram], ...]:
        """(name, help, histogram) of every histogram, in ``/metrics`` order (vLLM's texts)."""
        return (
            (
                "vllm:time_to_first_token_seconds",
                "Histogram of time to first token in seconds.",
                self.ttft,
            ),
            (
                "vllm:inter_token_latency_seconds",
                "Histogram of inter-token latency in seconds.",
                self.itl,
            ),
            (
                "vllm:e2e_request_latency_seconds",
                "Histogram of e2e request latency in seconds.",
                self.e2e,
            ),
            (
                "vllm:request_queue_time_seconds",
                "Histogram of time spent in WAITING phase for request.",
                self.queue,
            ),
            (
                "vllm:request_inference_time_seconds",
                "Histogram of time spent in RUNNING phase for request.",
                self.inference,
            ),
            (
                "vllm:request_prefill_time_seconds",
                "Histogram of time spent in PREFILL phase for request.",
                self.prefill,
            ),
            (
                "vllm:request_decode_time_seconds",
                "Histogram of time spent in DECODE phase for request.",
                self.decode,
            ),
            (
                "vllm:request_time_per_output_token_seconds",
                "Histogram of time_per_output_token_seconds per request.",
                self.tpot,
            ),
        )


def _esc(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(labels: Mapping[str, str]) -> str:
    return "{" + ",".join(f'{k}="{_esc(v)}"' for k, v in labels.items()) + "}"


def _fmt(value: float) -> str:
    if value == int(value) and abs(value) < 1e15:
        return f"{int(value)}.0"
    return repr(float(value))


def _family(lines: list[str], name: str, kind: str, help_text: str) -> None:
    lines.append(f"# HELP {name} {help_text}")
    lines.append(f"# TYPE {name} {kind}")


def _histogram(
    lines: list[str], name: str, help_text: str, h: Histogram, labels: Mapping[str, str]
) -> None:
    _family(lines, name, "histogram", help_text)
    running = 0
    for bound, count in zip(h.bounds, h.counts, strict=False):
        running += count
        lines.append(f"{name}_bucket{_labels({**labels, 'le': _fmt(bound)})} {_fmt(running)}")
    lines.append(f"{name}_bucket{_labels({**labels, 'le': '+Inf'})} {_fmt(h.n)}")
    lines.append(f"{name}_count{_labels(labels)} {_fmt(h.n)}")
    lines.append(f"{name}_sum{_labels(labels)} {_fmt(h.total)}")


def render_engine_metrics(
    *,
    model_name: str,
    engine_index: str,
    running: int,
    waiting: int,
    kv_usage: float,
    cache_config: Mapping[str, str],
    start_time: float,
    stats: EngineStats,
) -> bytes:
    """The ``/metrics`` body of one engine."""
    lab = {"model_name": model_name, "engine": engine_index}
    lines: list[str] = []
    _family(
        lines,
        "process_start_time_seconds",
        "gauge",
        "Start time of the process since unix epoch in seconds.",
    )
    lines.append(f"process_start_time_seconds {_fmt(start_time)}")
    for name, value, help_text in (
        ("vllm:num_requests_running", running, "Number of requests in model execution batches."),
        ("vllm:num_requests_waiting", waiting, "Number of requests waiting to be processed."),
        ("vllm:kv_cache_usage_perc", kv_usage, "KV-cache usage. 1 means 100 percent usage."),
    ):
        _family(lines, name, "gauge", help_text)
        lines.append(f"{name}{_labels(lab)} {_fmt(value)}")
    _family(lines, "vllm:cache_config_info", "gauge", "Information of the LLMEngine CacheConfig")
    lines.append(f"vllm:cache_config_info{_labels({**cache_config, 'engine': engine_index})} 1.0")
    for name, value, help_text in (
        ("vllm:num_preemptions", 0, "Cumulative number of preemption from the engine."),
        ("vllm:prompt_tokens", stats.prompt_tokens, "Number of prefill tokens processed."),
        (
            "vllm:generation_tokens",
            stats.generation_tokens,
            "Number of generation tokens processed.",
        ),
    ):
        _family(lines, name, "counter", help_text)
        lines.append(f"{name}_total{_labels(lab)} {_fmt(value)}")
    _family(lines, "vllm:request_success", "counter", "Count of successfully processed requests.")
    for reason, count in stats.success.items():
        lines.append(
            f"vllm:request_success_total{_labels({**lab, 'finished_reason': reason})} {_fmt(count)}"
        )
    for name, help_text, h in stats.histograms():
        _histogram(lines, name, help_text, h, lab)
    return ("\n".join(lines) + "\n").encode("utf-8")


def render_gauges(gauges: Iterable[tuple[str, str, float]]) -> bytes:
    """Plain gauges (the router's ``/metrics``): (name, help, value)."""
    lines: list[str] = []
    for name, help_text, value in gauges:
        _family(lines, name, "gauge", help_text)
        lines.append(f"{name} {_fmt(value)}")
    return ("\n".join(lines) + "\n").encode("utf-8")


def cache_config_labels(
    *,
    api_style: str,
    block_size: int,
    num_gpu_blocks: int,
    prefix_caching: bool,
    gpu_memory_utilization: float,
    kv_cache_tokens: int,
    max_model_len: int,
) -> dict[str, str]:
    """``vllm:cache_config_info`` labels: each CacheConfig attribute as a string, by version."""
    labels = {
        "block_size": str(block_size),
        "cache_dtype": "auto",
        "calculate_kv_scales": "False",
        "cpu_kvcache_space_bytes": "None",
        "cpu_offload_gb": "0",
        "enable_prefix_caching": str(prefix_caching),
        "gpu_memory_utilization": str(gpu_memory_utilization),
        "is_attention_free": "False",
        "kv_cache_memory_bytes": "None",
        "kv_sharing_fast_prefill": "False",
        "mamba_cache_dtype": "auto",
        "mamba_page_size_padded": "None",
        "mamba_ssm_cache_dtype": "auto",
        "num_cpu_blocks": "None",
        "num_gpu_blocks": str(num_gpu_blocks),
        "num_gpu_blocks_override": "None",
        "prefix_caching_hash_algo": "sha256",
        "sliding_window": "None",
        "swap_space": "4",
    }
    if api_style == "0.33":
        del labels["swap_space"]
        labels.update(
            {
                "hash_block_size": str(block_size),
                "kv_cache_max_concurrency": f"{kv_cache_tokens / max_model_len:.2f}",
                "kv_cache_size_tokens": str(kv_cache_tokens),
                "kv_offloading_backend": "None",
                "kv_offloading_size": "None",
            }
        )
    return dict(sorted(labels.items()))
