"""For the span tests: a strict decoder of OTLP ``ExportTraceServiceRequest`` bodies and a loopback
OTLP/HTTP receiver that keeps what it was sent.

The decoder is written from opentelemetry-proto's field numbers, independently of narwhal-sim's
encoder, and refuses a known field with the wrong wire type, so an encoder bug is a failure here
rather than a silently skipped field.
"""

from __future__ import annotations

import struct
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

Value = str | bool | int | float | bytes
_VARINT, _FIXED64, _LEN, _FIXED32 = 0, 1, 2, 5


def _read_varint(buf: bytes, i: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        byte = buf[i]
        i += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, i
        shift += 7
        assert shift < 70, "varint longer than ten bytes"


def fields(buf: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """Every (field number, wire type, value) of one message: varints as ints, the rest bytes."""
    i = 0
    while i < len(buf):
        key, i = _read_varint(buf, i)
        number, wire = key >> 3, key & 7
        value: int | bytes
        if wire == _VARINT:
            value, i = _read_varint(buf, i)
        elif wire == _FIXED64:
            value, i = buf[i : i + 8], i + 8
        elif wire == _LEN:
            size, i = _read_varint(buf, i)
            value, i = buf[i : i + size], i + size
        elif wire == _FIXED32:
            value, i = buf[i : i + 4], i + 4
        else:
            raise AssertionError(f"wire type {wire} (field {number})")
        assert i <= len(buf), "message ends inside a field"
        yield number, wire, value


def _want(wire: int, expected: int, what: str) -> None:
    assert wire == expected, f"{what}: wire type {wire}, expected {expected}"


def _bytes(value: int | bytes) -> bytes:
    assert isinstance(value, bytes)
    return value


def _int(value: int | bytes) -> int:
    assert isinstance(value, int)
    return value


def any_value(buf: bytes) -> Value:
    """An ``AnyValue``'s one value (string, bool, int64, double or bytes)."""
    found: list[Value] = []
    for number, wire, value in fields(buf):
        if number == 1:
            _want(wire, _LEN, "AnyValue.string_value")
            found.append(_bytes(value).decode())
        elif number == 2:
            _want(wire, _VARINT, "AnyValue.bool_value")
            found.append(bool(_int(value)))
        elif number == 3:
            _want(wire, _VARINT, "AnyValue.int_value")
            n = _int(value)
            found.append(n - (1 << 64) if n >= 1 << 63 else n)
        elif number == 4:
            _want(wire, _FIXED64, "AnyValue.double_value")
            found.append(struct.unpack("<d", _bytes(value))[0])
        elif number == 7:
            _want(wire, _LEN, "AnyValue.bytes_value")
            found.append(_bytes(value))
        else:
            raise AssertionError(f"AnyValue field {number}")
    assert len(found) == 1, f"AnyValue with {len(found)} values"
    return found[0]


def key_value(buf: bytes) -> tuple[str, Value]:
    """A ``KeyValue`` as (key, value)."""
    key: str | None = None
    val: Value | None = None
    for number, wire, value in fields(buf):
        _want(wire, _LEN, f"KeyValue field {number}")
        if number == 1:
            key = _bytes(value).decode()
        elif number == 2:
            val = any_value(_bytes(value))
        else:
            raise AssertionError(f"KeyValue field {number}")
    assert key is not None and val is not None, "KeyValue without key or value"
    return key, val


@dataclass
class Span:
    """One decoded span."""

    trace_id: bytes = b""
    span_id: bytes = b""
    parent_span_id: bytes = b""
    name: str = ""
    kind: int = 0
    start_time_unix_nano: int = 0
    end_time_unix_nano: int = 0
    attributes: dict[str, Value] = field(default_factory=dict)
    resource: dict[str, Value] = field(default_factory=dict)
    scope: str = ""


_SPAN_LEN = {1: "trace_id", 2: "span_id", 4: "parent_span_id", 5: "name"}


def span(buf: bytes) -> Span:
    """A ``Span`` message."""
    out = Span()
    for number, wire, value in fields(buf):
        if number in _SPAN_LEN:
            _want(wire, _LEN, f"Span.{_SPAN_LEN[number]}")
            data = _bytes(value)
            setattr(out, _SPAN_LEN[number], data.decode() if number == 5 else data)
        elif number == 6:
            _want(wire, _VARINT, "Span.kind")
            out.kind = _int(value)
        elif number in (7, 8):
            _want(wire, _FIXED64, "Span time")
            stamp = struct.unpack("<Q", _bytes(value))[0]
            if number == 7:
                out.start_time_unix_nano = stamp
            else:
                out.end_time_unix_nano = stamp
        elif number == 9:
            _want(wire, _LEN, "Span.attributes")
            k, v = key_value(_bytes(value))
            assert k not in out.attributes, f"attribute {k} twice"
            out.attributes[k] = v
        else:
            raise AssertionError(f"Span field {number} (wire {wire})")
    return out


def _sub(buf: bytes, number: int, what: str) -> Iterator[bytes]:
    for n, wire, value in fields(buf):
        if n == number:
            _want(wire, _LEN, what)
            yield _bytes(value)


def export_request(buf: bytes) -> list[Span]:
    """Every span of an ``ExportTraceServiceRequest``, each with its resource's attributes and
    its scope's name."""
    spans: list[Span] = []
    for resource_spans in _sub(buf, 1, "resource_spans"):
        resource: dict[str, Value] = {}
        for res in _sub(resource_spans, 1, "ResourceSpans.resource"):
            resource.update(key_value(kv) for kv in _sub(res, 1, "Resource.attributes"))
        for scope_spans in _sub(resource_spans, 2, "ResourceSpans.scope_spans"):
            scope = ""
            for sc in _sub(scope_spans, 1, "ScopeSpans.scope"):
                scope = "".join(b.decode() for b in _sub(sc, 1, "InstrumentationScope.name"))
            for raw in _sub(scope_spans, 2, "ScopeSpans.spans"):
                s = span(raw)
                s.resource, s.scope = dict(resource), scope
                spans.append(s)
    return spans


@dataclass
class Post:
    """One request the receiver got."""

    path: str
    content_type: str
    body: bytes


class TraceReceiver:
    """An OTLP/HTTP receiver on a free loopback port (a thread): keeps every POST, answers
    ``status`` (``status_for(path)`` when given) with an empty protobuf body."""

    def __init__(self, status_for: Callable[[str], int] = lambda _path: 200) -> None:
        self.posts: list[Post] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                size = int(self.headers.get("content-length", "0"))
                body = self.rfile.read(size)
                with receiver._lock:
                    receiver.posts.append(
                        Post(self.path, self.headers.get("content-type", ""), body)
                    )
                self.send_response(status_for(self.path))
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> TraceReceiver:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def url(self, path: str = "/v1/traces") -> str:
        """``http://127.0.0.1:<port><path>``."""
        return f"http://127.0.0.1:{self.port}{path}"

    def received(self) -> list[Post]:
        """Every POST so far."""
        with self._lock:
            return list(self.posts)

    def spans(self, path: str | None = None) -> list[Span]:
        """Every span received so far (on ``path`` only, when given)."""
        posts = self.received()
        return [s for p in posts if path in (None, p.path) for s in export_request(p.body)]

    def wait_spans(
        self, wanted: Callable[[list[Span]], bool], path: str | None = None
    ) -> list[Span]:
        """The spans once ``wanted(spans)`` holds, waiting up to 30 s (exports are periodic)."""
        deadline = time.monotonic() + 30.0
        while True:
            got = self.spans(path)
            if wanted(got) or time.monotonic() > deadline:
                return got
            time.sleep(0.02)
