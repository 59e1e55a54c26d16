"""A minimal OTLP/HTTP trace sink: vLLM's per-request spans as JSON lines.

Runs with the vLLM venv's interpreter (it has ``opentelemetry-proto``)::

    VENV/bin/python tools/conformance/otlp_sink.py PORT OUT.jsonl

and accepts ``POST /v1/traces`` (``application/x-protobuf``, an ``ExportTraceServiceRequest``)
on 127.0.0.1:PORT. For every span named ``llm_request`` (one per finished request, stamped by
vLLM's output processor from its engine-core timestamps) it appends one line: the request id and
the ``gen_ai.*`` attributes (``gen_ai.latency.time_in_model_decode`` is the time from the first
to the last output token, ``gen_ai.usage.completion_tokens`` the tokens). Prints ``ready`` once
listening. Stops on SIGTERM or SIGINT.
"""

from __future__ import annotations

import importlib
import json
import signal
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import FrameType
from typing import Any

SPAN_NAME = "llm_request"


def _value(any_value: Any) -> object:
    kind = any_value.WhichOneof("value")
    return None if kind is None else getattr(any_value, kind)


def spans(payload: bytes) -> list[dict[str, object]]:
    """The ``llm_request`` spans of one export request, as flat dicts of their attributes."""
    module: Any = importlib.import_module(
        "opentelemetry.proto.collector.trace.v1.trace_service_pb2"
    )
    request = module.ExportTraceServiceRequest()
    request.ParseFromString(payload)
    out: list[dict[str, object]] = []
    for resource_spans in request.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                if span.name != SPAN_NAME:
                    continue
                doc: dict[str, object] = {a.key: _value(a.value) for a in span.attributes}
                doc["start_ns"] = int(span.start_time_unix_nano)
                out.append(doc)
    return out


def serve(port: int, out: Path) -> None:
    """Serve until SIGTERM/SIGINT, appending span lines to ``out``."""
    sink = out.open("a", encoding="utf-8")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            payload = self.rfile.read(length)
            try:
                found = spans(payload)
            except Exception as exc:
                self.send_error(400, f"unparseable export: {exc}")
                return
            for doc in found:
                sink.write(json.dumps(doc, sort_keys=True) + "\n")
            sink.flush()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)

    def stop(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    print("ready", flush=True)
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        sink.close()


def main(argv: list[str]) -> int:
    """``otlp_sink.py PORT OUT.jsonl``."""
    if len(argv) != 2:
        print("usage: otlp_sink.py PORT OUT.jsonl", file=sys.stderr)
        return 2
    serve(int(argv[0]), Path(argv[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
