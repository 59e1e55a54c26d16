"""The stored decode TPOT against what the engine served.

**What the engine served**, per request, is vLLM's own trace span for it (``_tracing``): the time
from its first to its last output token as the engine stamped them when its steps produced them
(``gen_ai.latency.time_in_model_decode``, from engine-core timestamps, whatever the API server
then did with the tokens) over its tokens less one. Per cohort the engine's figure is the median
over the cohort's streams, the same aggregate the profiler stores. ``per_cohort`` pairs it with
the cohort's stored TPOT.

``compare`` is a coarser cross-check that needs no tracing: vLLM's
``vllm:inter_token_latency_seconds`` histogram (one observation per output token after a
stream's first) read just before and just after the profile, sum over count, against the
token-weighted mean of the stored cohort TPOTs. It is recorded, not asserted: the histogram also
holds the long step in which a cohort's first stream waits for the others' prefill, which lies
outside the profile's overlap window, and one cohort spoiled by a starved API server moves it.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from ._suite import Suite, delta
from ._tracing import TOKENS, engine_tpot_s


@dataclass(frozen=True)
class CohortRatio:
    """One decode cohort: its stored TPOT and the engine's (median over its streams)."""

    input_len: int
    concurrency: int
    repeat: int
    stored_s: float
    engine_s: float
    burst_share: float | None

    @property
    def ratio(self) -> float:
        """stored / engine."""
        return self.stored_s / self.engine_s

    def figures(self) -> dict[str, Any]:
        """For results.json and assertion messages."""
        return {
            "point": f"input {self.input_len} x {self.concurrency} #{self.repeat}",
            "stored_ms": round(self.stored_s * 1e3, 3),
            "engine_ms": round(self.engine_s * 1e3, 3),
            "stored_over_engine": round(self.ratio, 4),
            "burst_share": self.burst_share,
        }


def per_cohort(suite: Suite, spans: dict[str, dict[str, Any]]) -> list[CohortRatio]:
    """Every measured cohort of the sidecar with the engine's own TPOT for it."""
    out: list[CohortRatio] = []
    missing: list[str] = []
    for cohort in suite.samples_doc()["decode_samples"]:
        if cohort["tpot_s"] is None:
            continue
        engine: list[float] = []
        for stream in cohort["streams"]:
            span = spans.get(stream["request_id"])
            if span is None:
                missing.append(stream["request_id"])
                continue
            assert int(span[TOKENS]) == sum(stream["chunk_tokens"]), (span, stream)
            engine.append(engine_tpot_s(span))
        if len(engine) == len(cohort["streams"]):
            out.append(
                CohortRatio(
                    cohort["input_len"],
                    cohort["concurrency"],
                    cohort["repeat"],
                    cohort["tpot_s"],
                    statistics.median(engine),
                    cohort.get("burst_share"),
                )
            )
    assert not missing, f"vLLM exported no trace span for streams {missing}"
    return out


def compare(suite: Suite) -> dict[str, Any]:
    """The histogram cross-check (see the module docstring), as figures."""
    count = delta(suite.before, suite.after, "vllm:inter_token_latency_seconds_count")
    total = delta(suite.before, suite.after, "vllm:inter_token_latency_seconds_sum")
    samples = suite.samples_doc()["decode_samples"]
    weighted = [(c["concurrency"], c["tpot_s"]) for c in samples if c["tpot_s"] is not None]
    if count <= 0 or not weighted:
        return {"engine_intervals": count, "cohorts_measured": len(weighted)}
    stored = sum(n * t for n, t in weighted) / sum(n for n, _ in weighted)
    engine = total / count
    return {
        "engine_mean_itl_ms": round(engine * 1e3, 3),
        "stored_mean_tpot_ms": round(stored * 1e3, 3),
        "stored_over_engine": round(stored / engine, 4),
        "engine_intervals": int(count),
        "cohorts_measured": len(weighted),
        "cohorts": len(samples),
    }
