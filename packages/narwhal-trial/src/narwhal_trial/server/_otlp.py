"""Decoding an OTLP/HTTP trace export (``ExportTraceServiceRequest``, protobuf) by hand.

The trial needs a span's name, times and attributes, and its resource's attributes; reading them
takes a few dozen lines of the protobuf wire format, so the trial depends on no protobuf package.
Field numbers are opentelemetry-proto's (``collector/trace/v1``, ``trace/v1``, ``common/v1``,
``resource/v1``). Unknown fields are skipped, as protobuf readers do; a truncated or malformed
message raises ``OtlpDecodeError``.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TypedDict

from narwhal_trial._errors import TrialError

AttrValue = str | bool | int | float | bytes | list[object] | dict[str, object] | None


class SpanLine(TypedDict):
    """One line of the receiver's ``spans.jsonl``: an ``llm_request`` span, the engine it came
    from (None when neither the export's path nor its resource names one), its times and its
    span and resource attributes, made plain for JSON."""

    engine: str | None
    name: str
    start_ns: int
    end_ns: int
    attributes: dict[str, object]
    resource: dict[str, object]


class OtlpDecodeError(TrialError):
    """An export body that is not an ``ExportTraceServiceRequest``."""


@dataclass(slots=True)
class DecodedSpan:
    """One span with its resource's attributes."""

    name: str = ""
    start_ns: int = 0
    end_ns: int = 0
    attributes: dict[str, AttrValue] = field(default_factory=dict)
    resource: dict[str, AttrValue] = field(default_factory=dict)


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise OtlpDecodeError("truncated varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise OtlpDecodeError("varint longer than 10 bytes")


def _fields(buf: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """(field number, wire type, value): an int for varint/fixed, bytes for length-delimited."""
    pos = 0
    while pos < len(buf):
        tag, pos = _varint(buf, pos)
        number, wire = tag >> 3, tag & 7
        value: int | bytes
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 1:
            if pos + 8 > len(buf):
                raise OtlpDecodeError("truncated fixed64")
            value = int.from_bytes(buf[pos : pos + 8], "little")
            pos += 8
        elif wire == 2:
            length, pos = _varint(buf, pos)
            if pos + length > len(buf):
                raise OtlpDecodeError("truncated length-delimited field")
            value = buf[pos : pos + length]
            pos += length
        elif wire == 5:
            if pos + 4 > len(buf):
                raise OtlpDecodeError("truncated fixed32")
            value = int.from_bytes(buf[pos : pos + 4], "little")
            pos += 4
        else:
            raise OtlpDecodeError(f"unsupported wire type {wire} (field {number})")
        if number == 0:
            raise OtlpDecodeError("field number 0")
        yield number, wire, value


def _bytes(value: int | bytes) -> bytes:
    if not isinstance(value, bytes):
        raise OtlpDecodeError("expected a length-delimited field")
    return value


def _text(value: int | bytes) -> str:
    try:
        return _bytes(value).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise OtlpDecodeError(f"string field is not UTF-8: {exc}") from exc


def _any_value(buf: bytes) -> AttrValue:
    out: AttrValue = None
    for number, wire, value in _fields(buf):
        if number == 1:
            out = _text(value)
        elif number == 2 and wire == 0:
            out = bool(value)
        elif number == 3 and wire == 0:
            assert isinstance(value, int)
            out = value - (1 << 64) if value >= 1 << 63 else value
        elif number == 4 and wire == 1:
            assert isinstance(value, int)
            out = struct.unpack("<d", value.to_bytes(8, "little"))[0]
        elif number == 5:  # ArrayValue { repeated AnyValue values = 1 }
            out = [_any_value(_bytes(v)) for n, _, v in _fields(_bytes(value)) if n == 1]
        elif number == 6:  # KeyValueList { repeated KeyValue values = 1 }
            out = _attributes(_bytes(v) for n, _, v in _fields(_bytes(value)) if n == 1)
        elif number == 7:
            out = _bytes(value)
    return out


def _key_value(buf: bytes) -> tuple[str, AttrValue]:
    key, val = "", None
    for number, _, value in _fields(buf):
        if number == 1:
            key = _text(value)
        elif number == 2:
            val = _any_value(_bytes(value))
    return key, val


def _attributes(items: Iterator[bytes]) -> dict[str, object]:
    return dict(_key_value(item) for item in items)


def _span(buf: bytes, resource: dict[str, AttrValue]) -> DecodedSpan:
    span = DecodedSpan(resource=resource)
    for number, wire, value in _fields(buf):
        if number == 5:
            span.name = _text(value)
        elif number == 7 and wire == 1:
            assert isinstance(value, int)
            span.start_ns = value
        elif number == 8 and wire == 1:
            assert isinstance(value, int)
            span.end_ns = value
        elif number == 9:
            key, val = _key_value(_bytes(value))
            span.attributes[key] = val
    return span


def decode_export(payload: bytes) -> list[DecodedSpan]:
    """Every span of one ``ExportTraceServiceRequest``, in order."""
    spans: list[DecodedSpan] = []
    for number, _, resource_spans in _fields(payload):
        if number != 1:
            continue
        resource: dict[str, AttrValue] = {}
        scopes: list[bytes] = []
        for n, _, v in _fields(_bytes(resource_spans)):
            if n == 1:  # Resource { repeated KeyValue attributes = 1 }
                for rn, _, rv in _fields(_bytes(v)):
                    if rn == 1:
                        key, val = _key_value(_bytes(rv))
                        resource[key] = val
            elif n == 2:
                scopes.append(_bytes(v))
        for scope in scopes:  # ScopeSpans { scope = 1; repeated Span spans = 2 }
            for sn, _, sv in _fields(scope):
                if sn == 2:
                    spans.append(_span(_bytes(sv), resource))
    return spans
