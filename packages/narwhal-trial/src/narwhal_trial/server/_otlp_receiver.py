"""The OTLP/HTTP trace receiver behind ``run --otlp-receiver HOST:PORT``, in its own process.

It runs beside the trial, never inside the client's event loop, so decoding exports costs the
measuring process nothing. ``python -m narwhal_trial.server._otlp_receiver HOST PORT OUT_DIR``
listens, prints ``ready HOST:PORT`` once bound (or ``error: ...`` and exits 1), and accepts
``POST /v1/traces`` and ``POST /v1/traces/<engine>`` (``application/x-protobuf``, gzip allowed):
each ``llm_request`` span becomes one line of ``OUT_DIR/spans.jsonl`` with the engine it came
from (the path's last part, else the resource's ``service.instance.id``). On SIGTERM it writes
``OUT_DIR/receiver.json`` (its counts) and exits 0.

``Receiver`` is the run's side: it starts the process, waits for ``ready``, and stops it.
"""

from __future__ import annotations

import gzip
import os
import re
import signal
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import FrameType
from typing import IO, Any

import orjson

from narwhal_trial._errors import TrialError, TrialUsageError
from narwhal_trial.server._otlp import AttrValue, OtlpDecodeError, SpanLine, decode_export

SPAN_NAME = "llm_request"
SPANS_FILE = "spans.jsonl"
FACTS_FILE = "receiver.json"
_PATH = re.compile(r"^/v1/traces(?:/(?P<engine>[A-Za-z0-9][A-Za-z0-9._-]*))?/?$")
_MAX_BODY = 64 << 20
START_TIMEOUT_S = 20.0

_MODULE = "narwhal_trial.server._otlp_receiver"
"""What ``python -m`` runs in the receiver's own process."""


def _plain(value: AttrValue | object) -> object:
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


def _plain_map(values: dict[str, AttrValue]) -> dict[str, object]:
    return {key: _plain(value) for key, value in values.items()}


class _Sink:
    """The spans file and the counts, shared by the handler threads."""

    def __init__(self, out: Path) -> None:
        fd = os.open(out / SPANS_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        self.file = os.fdopen(fd, "ab")
        self.lock = threading.Lock()
        self.counts = {"exports": 0, "rejected": 0, "spans": 0, "other_spans": 0}

    def take(self, payload: bytes, engine: str | None) -> None:
        spans = decode_export(payload)
        lines: list[bytes] = []
        other = 0
        for span in spans:
            if span.name != SPAN_NAME:
                other += 1
                continue
            source = engine or span.resource.get("service.instance.id")
            doc: SpanLine = {
                "engine": source if isinstance(source, str) else None,
                "name": span.name,
                "start_ns": span.start_ns,
                "end_ns": span.end_ns,
                "attributes": _plain_map(span.attributes),
                "resource": _plain_map(span.resource),
            }
            lines.append(orjson.dumps(doc) + b"\n")
        with self.lock:
            self.file.write(b"".join(lines))
            self.file.flush()
            self.counts["exports"] += 1
            self.counts["spans"] += len(lines)
            self.counts["other_spans"] += other


def _say(stdout: IO[str], line: str) -> None:
    stdout.write(line + "\n")
    stdout.flush()


def serve(host: str, port: int, out: Path, stdout: IO[str]) -> int:
    """Listen until SIGTERM or SIGINT; 1 when the address cannot be bound."""
    try:
        sink = _Sink(out)
    except OSError as exc:
        _say(stdout, f"error: cannot create {out / SPANS_FILE}: {exc}")
        return 1

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _answer(
            self, status: int, body: bytes = b"", kind: str = "application/x-protobuf"
        ) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:
            match = _PATH.match(self.path.split("?", 1)[0])
            length = int(self.headers.get("Content-Length") or 0)
            if not 0 <= length <= _MAX_BODY:
                self._answer(413, b"export too large", "text/plain")
                return
            payload = self.rfile.read(length)
            if match is None:
                self._answer(404, b"POST /v1/traces or /v1/traces/<engine>", "text/plain")
                return
            kind = (self.headers.get("Content-Type") or "").split(";", 1)[0].strip()
            if kind != "application/x-protobuf":
                self._answer(415, b"OTLP/HTTP protobuf only", "text/plain")
                return
            try:
                if (self.headers.get("Content-Encoding") or "").lower() == "gzip":
                    payload = gzip.decompress(payload)
                sink.take(payload, match.group("engine"))
            except (OtlpDecodeError, OSError, EOFError) as exc:
                with sink.lock:
                    sink.counts["rejected"] += 1
                self._answer(400, f"unreadable export: {exc}".encode(), "text/plain")
                return
            self._answer(200)

        def log_message(self, format: str, *args: Any) -> None:
            return

    try:
        server = ThreadingHTTPServer((host, port), Handler)
    except OSError as exc:
        _say(stdout, f"error: cannot listen on {host}:{port}: {exc}")
        return 1
    server.daemon_threads = True

    def stop(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    bound_host, bound_port = str(server.server_address[0]), int(server.server_address[1])
    _say(stdout, f"ready {bound_host}:{bound_port}")
    try:
        server.serve_forever(poll_interval=0.1)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        with sink.lock:
            sink.file.close()
            facts = orjson.dumps(sink.counts)
        (out / FACTS_FILE).write_bytes(facts + b"\n")
    return 0


def check_listen(host: str, port: int) -> None:
    """TrialUsageError when ``host:port`` cannot be bound now (in use, not an address here), so
    ``run`` refuses it before anything is created."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        family, kind, proto, _, address = infos[0]
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server does
            probe.bind(address)
    except OSError as exc:
        raise TrialUsageError(
            f"--otlp-receiver {host}:{port}: cannot listen there ({exc.strerror or exc})"
        ) from exc


class Receiver:
    """The receiver process of one run."""

    def __init__(self, host: str, port: int, out: Path) -> None:
        self.out = out
        self.address = f"{host}:{port}"
        self._process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "narwhal_trial.server._otlp_receiver",
                host,
                str(port),
                str(out),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert self._process.stdout is not None
        timer = threading.Timer(START_TIMEOUT_S, self._process.kill)
        timer.start()
        try:
            line = self._process.stdout.readline().strip()
        finally:
            timer.cancel()
        if not line.startswith("ready "):
            self.stop()
            why = line.removeprefix("error: ") or "it did not start"
            raise TrialError(f"--otlp-receiver {self.address}: {why}")
        self.address = line.removeprefix("ready ")

    @property
    def spans_path(self) -> Path:
        """Where the spans land."""
        return self.out / SPANS_FILE

    def stop(self) -> dict[str, int]:
        """Stop the process; its counts (empty when it wrote none)."""
        process = self._process
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if process.stdout is not None:
            process.stdout.close()
        try:
            doc = orjson.loads((self.out / FACTS_FILE).read_bytes())
        except (OSError, orjson.JSONDecodeError):
            return {}
        return {str(k): int(v) for k, v in doc.items()} if isinstance(doc, dict) else {}


def main(argv: list[str]) -> int:
    """``HOST PORT OUT_DIR``."""
    if len(argv) != 3:
        sys.stderr.write("usage: python -m narwhal_trial.server._otlp_receiver HOST PORT OUT_DIR\n")
        return 2
    return serve(argv[0], int(argv[1]), Path(argv[2]), sys.stdout)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
