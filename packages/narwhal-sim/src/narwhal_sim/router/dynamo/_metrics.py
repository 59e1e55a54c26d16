"""The ``/metrics`` page of NVIDIA Dynamo's frontend (``dynamo_frontend_*`` families, Dynamo's
help texts and buckets), counted by the router that stands in for it.

As the Prometheus registry Dynamo uses, families come sorted by name, labels by label name, and
a labelled counter or histogram has no lines until something was counted in it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from narwhal_sim.engine._metrics import Histogram

_P = "dynamo_frontend_"
# fmt: off
TTFT_BUCKETS = (0.0, 0.0022, 0.0047, 0.01, 0.022, 0.047, 0.1, 0.22, 0.47, 1.0, 2.2, 4.7, 10.0,
                22.0, 48.0, 100.0, 220.0, 480.0)
ITL_BUCKETS = (0.0, 0.0018, 0.0033, 0.0059, 0.011, 0.02, 0.035, 0.064, 0.12, 0.21, 0.38, 0.69,
               1.2, 2.3, 4.1, 7.4, 13.0, 24.0, 44.0, 80.0)
DURATION_BUCKETS = (0.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 130.0, 260.0, 510.0)
ISL_BUCKETS = (0.0, 100.0, 210.0, 430.0, 870.0, 1800.0, 3600.0, 7400.0, 15000.0, 31000.0,
               63000.0, 130000.0)
OSL_BUCKETS = (0.0, 100.0, 210.0, 430.0, 880.0, 1800.0, 3700.0, 7600.0, 16000.0, 32000.0)
# fmt: on
_HISTOGRAMS = {
    "time_to_first_token_seconds": ("Time to first token in seconds", TTFT_BUCKETS),
    "inter_token_latency_seconds": ("Inter-token latency in seconds", ITL_BUCKETS),
    "request_duration_seconds": ("Duration of LLM requests", DURATION_BUCKETS),
    "input_sequence_tokens": ("Input sequence length in tokens", ISL_BUCKETS),
    "output_sequence_tokens": ("Output sequence length in tokens", OSL_BUCKETS),
}
_MODEL_GAUGES = {
    "model_context_length": "Maximum context length in tokens for a worker serving the model",
    "model_kv_cache_block_size": "KV cache block size in tokens for a worker serving the model",
    "model_max_num_batched_tokens": (
        "Maximum number of batched tokens for a worker serving the model"
    ),
    "model_max_num_seqs": "Maximum number of sequences for a worker serving the model",
    "model_migration_limit": "Maximum number of request migrations allowed for the model",
    "model_ready": (
        "Whether the frontend can route at least one inference request for the model "
        "(1 = ready, 0 = not ready)"
    ),
    "model_total_kv_blocks": "Total KV cache blocks available for a worker serving the model",
}
UNKNOWN_MODEL = "unknown_model"
Labels = tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """What the frontend reports of the workers serving one model."""

    context_length: int
    kv_cache_block_size: int
    max_num_batched_tokens: int
    max_num_seqs: int
    total_kv_blocks: int

    def gauges(self) -> dict[str, float]:
        """The ``dynamo_frontend_model_*`` gauges' values, by family name."""
        return {
            "model_context_length": self.context_length,
            "model_kv_cache_block_size": self.kv_cache_block_size,
            "model_max_num_batched_tokens": self.max_num_batched_tokens,
            "model_max_num_seqs": self.max_num_seqs,
            "model_migration_limit": 0,
            "model_ready": 1,
            "model_total_kv_blocks": self.total_kv_blocks,
        }


def _fmt(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(labels: Labels) -> str:
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(labels)) + "}"


class FrontendMetrics:
    """Gauges, counters and histograms of the frontend, updated as the router serves."""

    def __init__(self, models: Mapping[str, ModelInfo]) -> None:
        self.models = dict(models)
        self.inflight: Counter[str] = Counter()
        self.queued: Counter[str] = Counter()
        self.disconnected = 0
        self.started: Counter[Labels] = Counter()
        self.requests: Counter[Labels] = Counter()
        self.failures: Counter[Labels] = Counter()
        self.output_tokens: Counter[str] = Counter()
        self.histograms: dict[str, dict[str, Histogram]] = {name: {} for name in _HISTOGRAMS}

    def observe(self, family: str, model: str, value: float) -> None:
        """One observation of histogram ``family`` (a key of the histogram table) for ``model``."""
        per_model = self.histograms[family]
        if model not in per_model:
            per_model[model] = Histogram(_HISTOGRAMS[family][1])
        per_model[model].observe(value)

    def fail(self, failure: tuple[str, str]) -> None:
        """A request the frontend refused (``failures_total``: class, reason)."""
        self.failures[(("class", failure[0]), ("reason", failure[1]))] += 1

    def start(self, model: str, request_type: str) -> None:
        """A completion the handler accepted (``requests_started_total``)."""
        key = (("endpoint", "completions"), ("model", model), ("request_type", request_type))
        self.started[key] += 1

    def end(self, model: str, request_type: str, status: str, error_type: str = "") -> None:
        """A completion the handler finished (``requests_total``)."""
        key = (
            ("endpoint", "completions"),
            ("error_type", error_type),
            ("model", model),
            ("request_type", request_type),
            ("status", status),
        )
        self.requests[key] += 1

    def render(self) -> bytes:
        """The page: every family sorted by name, ``# HELP`` and ``# TYPE`` first."""
        families: dict[str, tuple[str, str, list[str]]] = {}

        def add(name: str, kind: str, help_text: str, lines: Iterable[str]) -> None:
            body = list(lines)
            if body or kind == "gauge":
                families[_P + name] = (kind, help_text, body)

        def per_model(name: str, values: Mapping[str, float]) -> list[str]:
            return [
                f"{_P}{name}{_labels((('model', m),))} {_fmt(values.get(m, 0))}"
                for m in self.models
            ]

        def series(name: str, counts: Mapping[Labels, int]) -> list[str]:
            return [f"{_P}{name}{_labels(k)} {_fmt(v)}" for k, v in sorted(counts.items())]

        held = "Number of requests currently being handled by the frontend, from HTTP handler "
        add("active_requests", "gauge", held + "entry to response completion",
            per_model("active_requests", self.inflight))  # fmt: skip
        add("inflight_requests", "gauge", "Number of inflight requests",
            per_model("inflight_requests", self.inflight))  # fmt: skip
        add("queued_requests", "gauge", "Number of requests in HTTP processing queue",
            per_model("queued_requests", self.queued))  # fmt: skip
        add("disconnected_clients", "gauge", "Number of disconnected clients",
            [f"{_P}disconnected_clients {self.disconnected}"])  # fmt: skip
        gauges = {m: info.gauges() for m, info in self.models.items()}
        for name, help_text in _MODEL_GAUGES.items():
            add(name, "gauge", help_text, per_model(name, {m: g[name] for m, g in gauges.items()}))
        add("requests_started_total", "counter",
            "Total number of LLM requests accepted by the frontend handler",
            series("requests_started_total", self.started))  # fmt: skip
        add("requests_total", "counter", "Total number of LLM requests processed",
            series("requests_total", self.requests))  # fmt: skip
        add("failures_total", "counter", "Total number of terminal semantic request failures",
            series("failures_total", self.failures))  # fmt: skip
        tokens: dict[Labels, int] = {(("model", m),): n for m, n in self.output_tokens.items()}
        add("output_tokens_total", "counter",
            "Total number of output tokens generated (updates in real-time)",
            series("output_tokens_total", tokens))  # fmt: skip
        for name, (help_text, _) in _HISTOGRAMS.items():
            add(name, "histogram", help_text, self._histogram_lines(name))
        out: list[str] = []
        for name in sorted(families):
            kind, help_text, body = families[name]
            out += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}", *body]
        return ("\n".join(out) + "\n").encode("utf-8")

    def _histogram_lines(self, family: str) -> list[str]:
        lines: list[str] = []
        name = _P + family
        for model, h in sorted(self.histograms[family].items()):
            labels = _labels((("model", model),))  # "le" goes last, as Prometheus writes it
            running = 0
            for bound, count in zip(h.bounds, h.counts, strict=False):
                running += count
                lines.append(f'{name}_bucket{labels[:-1]},le="{_fmt(bound)}"}} {running}')
            lines.append(f'{name}_bucket{labels[:-1]},le="+Inf"}} {h.n}')
            lines.append(f"{name}_sum{labels} {_fmt(h.total)}")
            lines.append(f"{name}_count{labels} {h.n}")
        return lines
