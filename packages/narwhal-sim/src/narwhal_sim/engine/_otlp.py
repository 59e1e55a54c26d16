"""OTLP/HTTP trace export's wire format: a small proto3 encoder for ``ExportTraceServiceRequest``.

Field numbers are opentelemetry-proto's (``collector/trace/v1/trace_service.proto``,
``trace/v1/trace.proto``, ``common/v1/common.proto``, ``resource/v1/resource.proto``):

- ExportTraceServiceRequest { 1: repeated ResourceSpans resource_spans }
- ResourceSpans { 1: Resource resource; 2: repeated ScopeSpans scope_spans; 3: string schema_url }
- Resource { 1: repeated KeyValue attributes }
- ScopeSpans { 1: InstrumentationScope scope; 2: repeated Span spans; 3: string schema_url }
- InstrumentationScope { 1: string name; 2: string version }
- Span { 1: bytes trace_id; 2: bytes span_id; 3: string trace_state; 4: bytes parent_span_id;
  5: string name; 6: SpanKind kind; 7: fixed64 start_time_unix_nano;
  8: fixed64 end_time_unix_nano; 9: repeated KeyValue attributes }
- KeyValue { 1: string key; 2: AnyValue value }
- AnyValue oneof { 1: string; 2: bool; 3: int64; 4: double; 7: bytes }

As proto3 encoders do, scalar fields holding their default (empty string, 0) are left out, except
the member of AnyValue's oneof, which is always written.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

AttrValue = str | bool | int | float | bytes
Attributes = Sequence[tuple[str, AttrValue]]

SPAN_KIND_SERVER = 2
_VARINT, _FIXED64, _LEN = 0, 1, 2  # wire types
_U64 = (1 << 64) - 1


@dataclass(frozen=True, slots=True)
class OtlpSpan:
    """One span as OTLP carries it (ids as raw bytes: 16 for the trace, 8 for the span)."""

    trace_id: bytes
    span_id: bytes
    name: str
    kind: int
    start_time_unix_nano: int
    end_time_unix_nano: int
    attributes: tuple[tuple[str, AttrValue], ...] = ()
    parent_span_id: bytes = b""
    trace_state: str = ""


def _varint(value: int) -> bytes:
    """Base-128 varint; a negative int64 as its 64-bit two's complement (ten bytes)."""
    value &= _U64
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _tag(field: int, wire: int) -> bytes:
    return _varint(field << 3 | wire)


def _len_field(field: int, payload: bytes) -> bytes:
    return _tag(field, _LEN) + _varint(len(payload)) + payload


def _bytes_field(field: int, data: bytes) -> bytes:
    return _len_field(field, data) if data else b""


def _str_field(field: int, text: str) -> bytes:
    return _bytes_field(field, text.encode("utf-8"))


def _fixed64_field(field: int, value: int) -> bytes:
    return _tag(field, _FIXED64) + struct.pack("<Q", value) if value else b""


def _any_value(value: AttrValue) -> bytes:
    if isinstance(value, bool):  # before int: a bool is an int in Python
        return _tag(2, _VARINT) + _varint(int(value))
    if isinstance(value, int):
        return _tag(3, _VARINT) + _varint(value)
    if isinstance(value, float):
        return _tag(4, _FIXED64) + struct.pack("<d", value)
    if isinstance(value, str):
        return _len_field(1, value.encode("utf-8"))
    return _len_field(7, value)


def encode_key_value(key: str, value: AttrValue) -> bytes:
    """One ``KeyValue`` message (string, bool, int64, double or bytes value)."""
    return _len_field(1, key.encode("utf-8")) + _len_field(2, _any_value(value))


def _attributes(field: int, attributes: Attributes) -> bytes:
    return b"".join(_len_field(field, encode_key_value(k, v)) for k, v in attributes)


def encode_span(span: OtlpSpan) -> bytes:
    """One ``Span`` message."""
    parts = [
        _bytes_field(1, span.trace_id),
        _bytes_field(2, span.span_id),
        _str_field(3, span.trace_state),
        _bytes_field(4, span.parent_span_id),
        _str_field(5, span.name),
        _tag(6, _VARINT) + _varint(span.kind) if span.kind else b"",
        _fixed64_field(7, span.start_time_unix_nano),
        _fixed64_field(8, span.end_time_unix_nano),
        _attributes(9, span.attributes),
    ]
    return b"".join(parts)


def encode_export_request(
    resource_attrs: Attributes, scope_name: str, spans: Sequence[OtlpSpan]
) -> bytes:
    """An ``ExportTraceServiceRequest``: one ResourceSpans (the resource's attributes) holding
    one ScopeSpans (an InstrumentationScope named ``scope_name``) with ``spans``."""
    resource = _attributes(1, resource_attrs)
    scope = _str_field(1, scope_name)
    scope_spans = _len_field(1, scope) + b"".join(_len_field(2, encode_span(s)) for s in spans)
    resource_spans = _len_field(1, resource) + _len_field(2, scope_spans)
    return _len_field(1, resource_spans)
