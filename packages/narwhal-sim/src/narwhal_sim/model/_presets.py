"""Latency presets and the step-time model every simulated GPU follows.

A step on one engine costs
``d0 + d1·n_decode + d2·Σctx_decode`` plus, for every prefill chunk of ``k`` tokens whose
request already holds ``p`` computed tokens, ``chunk_overhead + b·k + c·((p + k)² - p²)``.
Summed over the chunks of an ``L``-token prompt the prefill terms give ``b·L + c·L²`` exactly,
so the attention (quadratic) term survives chunking. A request additionally waits
``api_overhead`` (HTTP, tokenisation: off the GPU) before it can join a step, which makes an
idle engine's TTFT ``a + b·L + c·L² + e·(⌈L/C⌉ - 1)`` with ``a = api_overhead + e`` and
``e = d0 + chunk_overhead`` (one step's fixed cost per chunk).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace


@dataclass(frozen=True, slots=True)
class Preset:
    """One simulated GPU + model: step-time coefficients (seconds) and engine defaults."""

    name: str
    description: str
    a: float  # idle TTFT intercept: api_overhead + one step's fixed cost
    b: float  # s per prompt token
    c: float  # s per token² (attention)
    d0: float  # s per step (fixed)
    d1: float  # s per decoding sequence in the step
    d2: float  # s per context token summed over the decoding sequences
    chunk_overhead: float  # extra s per prefill chunk in a step (sampler, metadata)
    kv_cache_tokens: int
    max_num_batched_tokens: int = 8192
    max_num_seqs: int = 1024
    max_model_len: int = 131072
    block_size: int = 16
    jitter: float = 0.01  # relative Gaussian sigma of every step duration
    model: str = "meta-llama/Llama-3.1-8B-Instruct"

    @property
    def e(self) -> float:
        """Fixed cost of one prefill step (every chunk after the first adds one)."""
        return self.d0 + self.chunk_overhead

    @property
    def api_overhead(self) -> float:
        """Off-GPU delay between a request's arrival and its first schedulable step."""
        return max(0.0, self.a - self.e)

    def with_overrides(self, **changes: object) -> Preset:
        """A copy with some fields replaced (used by the sim config)."""
        return replace(self, **changes)  # type: ignore[arg-type]


def prefill_chunk_s(preset: Preset, prefix: int, chunk: int) -> float:
    """GPU time of one prefill chunk of ``chunk`` tokens after ``prefix`` computed tokens."""
    end = prefix + chunk
    return preset.chunk_overhead + preset.b * chunk + preset.c * (end * end - prefix * prefix)


def decode_step_s(preset: Preset, n: int, sum_ctx: int) -> float:
    """GPU time of the decode part of a step: ``d0 + d1·n + d2·Σctx`` (``d0`` even for n = 0)."""
    return preset.d0 + preset.d1 * n + preset.d2 * sum_ctx


def idle_ttft_s(
    preset: Preset, prompt_tokens: int, *, max_num_batched_tokens: int | None = None
) -> float:
    """The model's TTFT (seconds, unscaled, no jitter) for one request on an idle engine."""
    if prompt_tokens <= 0:
        raise ValueError("prompt_tokens must be positive")
    budget = max_num_batched_tokens or preset.max_num_batched_tokens
    chunks = math.ceil(prompt_tokens / budget)
    return (
        preset.a
        + preset.b * prompt_tokens
        + preset.c * prompt_tokens * prompt_tokens
        + preset.e * (chunks - 1)
    )


def tpot_s(preset: Preset, n: int, ctx: float) -> float:
    """Model TPOT (s) of ``n`` streams decoding at mean context ``ctx``: d0 + d1·n + d2·n·ctx."""
    if n <= 0:
        raise ValueError("n must be positive")
    return preset.d0 + preset.d1 * n + preset.d2 * n * ctx


_H200 = Preset(
    name="h200-llama-3.1-8b",
    description="Llama-3.1-8B BF16 on one H200 (default)",
    a=0.013,
    b=1.9e-5,
    c=5.1e-10,
    d0=0.0053,
    d1=5e-6,
    d2=3.1e-8,
    chunk_overhead=0.0007,
    kv_cache_tokens=850_000,
)
_H100 = Preset(
    name="h100-llama-3.1-8b",
    description="Llama-3.1-8B BF16 on one H100 SXM",
    a=0.014,
    b=1.9e-5,
    c=5.1e-10,
    d0=0.0068,
    d1=2e-6,
    d2=4.2e-8,
    chunk_overhead=0.0007,
    kv_cache_tokens=467_000,
)
_TINY = Preset(
    name="tiny",
    description="fast toy GPU for functional tests (ms-scale steps)",
    a=0.004,
    b=1e-7,
    c=0.0,
    d0=0.002,
    d1=1e-5,
    d2=0.0,
    chunk_overhead=0.0005,
    kv_cache_tokens=200_000,
    max_model_len=32768,
    jitter=0.0,
    model="sim/tiny",
)
_BENCH = Preset(
    name="flat-5ms",
    description="5 ms per decode step whatever the batch (simulator overhead benchmark)",
    a=0.006,
    b=0.0,
    c=0.0,
    d0=0.005,
    d1=0.0,
    d2=0.0,
    chunk_overhead=0.0,
    kv_cache_tokens=1_000_000,
    jitter=0.0,
)
_OVERLOADED = Preset(
    name="overloaded",
    description="slow GPU: misses TPOT 33 ms at 0.5 req/s per engine of 8192-in/128-out",
    a=0.040,
    b=1.4e-4,
    c=3.0e-9,
    d0=0.015,
    d1=1e-4,
    d2=5e-8,
    chunk_overhead=0.002,
    kv_cache_tokens=400_000,
)

DEFAULT_PRESET = _H200.name


def presets() -> dict[str, Preset]:
    """Every built-in preset by name."""
    return {p.name: p for p in (_H200, _H100, _TINY, _BENCH, _OVERLOADED)}


def get_preset(name: str | None = None) -> Preset:
    """The preset called ``name`` (default: Llama-3.1-8B on one H200); KeyError lists choices."""
    table = presets()
    key = name or DEFAULT_PRESET
    try:
        return table[key]
    except KeyError:
        raise KeyError(
            f"unknown preset {key!r}; choose one of {', '.join(sorted(table))}"
        ) from None
