"""vLLM's per-request trace spans, collected by ``otlp_sink.py`` next to a server.

``sink(python, folder)`` starts the sink (with the vLLM venv's interpreter) on a free loopback
port and yields what a server needs to export to it: ``--otlp-traces-endpoint`` and the
environment that selects OTLP/HTTP and a short export delay. ``wait_for_spans`` reads the spans
back, keyed by the request id the client sent as ``X-Request-Id``.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from narwhal_sim.testing import free_port

SINK_SCRIPT = Path(__file__).resolve().with_name("otlp_sink.py")
DECODE_S = "gen_ai.latency.time_in_model_decode"
TOKENS = "gen_ai.usage.completion_tokens"
REQUEST_ID = "gen_ai.request.id"


@dataclass(frozen=True)
class Sink:
    """A running sink: the server options that export to it and where its spans land."""

    endpoint: str
    spans_path: Path

    def server_args(self) -> tuple[str, ...]:
        """``--otlp-traces-endpoint URL``."""
        return ("--otlp-traces-endpoint", self.endpoint)

    def server_env(self) -> dict[str, str]:
        """OTLP over HTTP (the sink speaks no gRPC); export every 0.5 s."""
        return {
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
            "OTEL_BSP_SCHEDULE_DELAY": "500",
        }


@contextlib.contextmanager
def sink(python: Path, folder: Path) -> Iterator[Sink]:
    """Run the sink for the duration of the block."""
    port = free_port()
    spans_path = folder / "spans.jsonl"
    log = (folder / "otlp-sink.log").open("wb")
    process = subprocess.Popen(
        [str(python), str(SINK_SCRIPT), str(port), str(spans_path)],
        stdout=subprocess.PIPE,
        stderr=log,
        stdin=subprocess.DEVNULL,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.strip() == b"ready", f"the OTLP sink did not start (see {log.name})"
        yield Sink(f"http://127.0.0.1:{port}/v1/traces", spans_path)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()
        log.close()


def _key(span_id: str) -> str:
    """``cmpl-<X-Request-Id>-0`` (prompt 0 of the completion) → ``<X-Request-Id>``."""
    return span_id.removeprefix("cmpl-").removesuffix("-0")


def read_spans(path: Path) -> dict[str, dict[str, Any]]:
    """Every span so far, by the client's request id."""
    if not path.is_file():
        return {}
    out: dict[str, dict[str, Any]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line:
            doc = json.loads(line)
            out[_key(str(doc[REQUEST_ID]))] = doc
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
