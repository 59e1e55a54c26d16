"""vLLM's per-request trace spans, received by the trial package's OTLP/HTTP receiver.

``sink(folder)`` runs ``narwhal_trial``'s receiver (the process behind ``run --otlp-receiver``,
its own protobuf decoder, no vLLM code) on a free loopback port and yields what a server needs to
export to it: ``--otlp-traces-endpoint`` and the environment that selects OTLP/HTTP and a short
export delay. ``wait_for_spans`` reads the spans back, keyed by the request id the client sent as
``X-Request-Id``, each as its flat attributes.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from narwhal_sim.testing import free_port
from narwhal_trial.server._otlp_receiver import Receiver

DECODE_S = "gen_ai.latency.time_in_model_decode"
TOKENS = "gen_ai.usage.completion_tokens"
REQUEST_ID = "gen_ai.request.id"


@dataclass(frozen=True)
class Sink:
    """A running receiver: the server options that export to it and where its spans land."""

    endpoint: str
    spans_path: Path

    def server_args(self) -> tuple[str, ...]:
        """``--otlp-traces-endpoint URL``."""
        return ("--otlp-traces-endpoint", self.endpoint)

    def server_env(self) -> dict[str, str]:
        """OTLP over HTTP (the receiver speaks no gRPC); export every 0.5 s."""
        return server_env()


def server_env() -> dict[str, str]:
    """What a vLLM server needs to export OTLP/HTTP protobuf every 0.5 s."""
    return {"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf", "OTEL_BSP_SCHEDULE_DELAY": "500"}


def endpoint(port: int, iid: str) -> str:
    """The export URL of engine ``iid`` at a receiver on 127.0.0.1:``port``."""
    return f"http://127.0.0.1:{port}/v1/traces/{iid}"


@contextlib.contextmanager
def sink(folder: Path, iid: str, port: int | None = None) -> Iterator[Sink]:
    """Run the receiver for the duration of the block (its files in ``folder/sink``)."""
    port = port or free_port()
    out = folder / "sink"
    out.mkdir(mode=0o700, exist_ok=True)
    receiver = Receiver("127.0.0.1", port, out)
    try:
        yield Sink(endpoint(port, iid), receiver.spans_path)
    finally:
        receiver.stop()


def _key(span_id: str) -> str:
    """``cmpl-<X-Request-Id>-0`` (prompt 0 of the completion) → ``<X-Request-Id>``."""
    return span_id.removeprefix("cmpl-").removesuffix("-0")


def read_spans(path: Path) -> dict[str, dict[str, Any]]:
    """Every span so far, by the client's request id: its attributes."""
    if not path.is_file():
        return {}
    out: dict[str, dict[str, Any]] = {}
    for line in path.read_bytes().splitlines():
        try:
            attrs = dict(orjson.loads(line)["attributes"])
        except (orjson.JSONDecodeError, KeyError, TypeError):
            continue  # blank, or the line the receiver is writing right now
        out[_key(str(attrs[REQUEST_ID]))] = attrs
    return out


def wait_for_spans(
    path: Path, request_ids: Iterable[str], timeout_s: float = 60.0
) -> dict[str, dict[str, Any]]:
    """The spans of ``request_ids`` once all have arrived (or what there is at the deadline)."""
    wanted = set(request_ids)
    deadline = time.monotonic() + timeout_s
    while True:
        spans = read_spans(path)
        if wanted <= spans.keys() or time.monotonic() > deadline:
            return {k: v for k, v in spans.items() if k in wanted}
        time.sleep(0.5)


def engine_tpot_s(span: dict[str, Any]) -> float:
    """The engine's time per output token of one request: first to last token over N - 1."""
    tokens = int(span[TOKENS])
    assert tokens > 1, span
    return float(span[DECODE_S]) / (tokens - 1)
