"""The OTLP protobuf encoder against bytes worked out by hand, and the tracing config and fault."""

from __future__ import annotations

import pytest

from narwhal_sim import Faults, OtlpSpan, SimConfigError, encode_export_request
from narwhal_sim.engine._otlp import encode_key_value, encode_span
from narwhal_sim.model._config import resolve_engines
from narwhal_sim.testing import fleet_document, sim_config
from narwhal_store import FleetConfig

from . import _otlp_kit as kit


@pytest.mark.parametrize(
    ("key", "value", "golden"),
    [
        # KeyValue{1: key} then {2: AnyValue{...}}: tags 0x0a and 0x12 (fields 1, 2, wire type 2)
        ("a", "b", "0a 01 61 12 03 0a 01 62"),  # string_value: field 1, wire 2
        ("n", 300, "0a 01 6e 12 03 18 ac 02"),  # int_value: field 3, varint (300 = ac 02)
        ("x", 0.5, "0a 01 78 12 09 21 00 00 00 00 00 00 e0 3f"),  # double: field 4, wire 1, LE
        ("m", -1, "0a 01 6d 12 0b 18 ff ff ff ff ff ff ff ff ff 01"),  # two's complement, 10 bytes
        ("t", True, "0a 01 74 12 02 10 01"),  # bool_value: field 2, varint
        ("z", 0, "0a 01 7a 12 02 18 00"),  # a oneof member is written even when it is 0
        ("b", b"\x00\xff", "0a 01 62 12 04 3a 02 00 ff"),  # bytes_value: field 7, wire 2
    ],
)
def test_key_value_golden_bytes(key: str, value: kit.Value, golden: str) -> None:
    """Each AnyValue type has its own field number and wire type; the decoder reads it back."""
    encoded = encode_key_value(key, value)
    assert encoded.hex(" ") == golden
    assert kit.key_value(encoded) == (key, value)


def test_span_golden_bytes() -> None:
    """Span fields 1, 2, 5 (length-delimited), 6 (varint), 7 and 8 (fixed64), 9 (attributes)."""
    span = OtlpSpan(
        trace_id=b"\x01" * 16,
        span_id=b"\x02" * 8,
        name="s",
        kind=2,
        start_time_unix_nano=1,
        end_time_unix_nano=2,
        attributes=(("a", "b"),),
    )
    golden = (
        "0a 10 " + "01 " * 16 + "12 08 " + "02 " * 8 + "2a 01 73 30 02 "
        "39 01 00 00 00 00 00 00 00 41 02 00 00 00 00 00 00 00 "
        "4a 08 0a 01 61 12 03 0a 01 62"
    )
    assert encode_span(span).hex(" ") == golden


def test_export_request_golden_bytes() -> None:
    """ExportTraceServiceRequest{1: ResourceSpans{1: Resource{1: KV}, 2: ScopeSpans{1: scope}}}."""
    encoded = encode_export_request([("k", "v")], "sc", [])
    golden = "0a 14 0a 0a 0a 08 0a 01 6b 12 03 0a 01 76 12 06 0a 04 0a 02 73 63"
    assert encoded.hex(" ") == golden


def test_export_request_round_trip() -> None:
    """Two spans under one resource and scope decode to what was encoded."""
    spans = [
        OtlpSpan(bytes([i]) * 16, bytes([i]) * 8, f"s{i}", 2, 10**18 + i, 2 * 10**18, (("i", i),))
        for i in (1, 2)
    ]
    body = encode_export_request([("service.name", "svc")], "scope", spans)
    decoded = kit.export_request(body)
    assert [(s.name, s.kind, s.attributes, s.scope) for s in decoded] == [
        ("s1", 2, {"i": 1}, "scope"),
        ("s2", 2, {"i": 2}, "scope"),
    ]
    assert decoded[0].resource == {"service.name": "svc"}
    assert (decoded[1].trace_id, decoded[1].span_id) == (b"\x02" * 16, b"\x02" * 8)
    assert (decoded[1].start_time_unix_nano, decoded[1].end_time_unix_nano) == (
        10**18 + 2,
        2 * 10**18,
    )


def _resolve(defaults: dict[str, object], **engine: object) -> str | None:
    doc = fleet_document([{"iid": "e0", "role": "mixed", "model": "m"}], {"e0": 18001})
    (settings,) = resolve_engines(FleetConfig.model_validate(doc), sim_config(defaults, e0=engine))
    return settings.otlp_traces_endpoint


def test_endpoint_iid_is_substituted() -> None:
    """``{iid}`` becomes the engine's iid, in ``defaults`` as in the engine's table; null: off."""
    assert _resolve({"otlp_traces_endpoint": "http://127.0.0.1:4318/t/{iid}"}) == (
        "http://127.0.0.1:4318/t/e0"
    )
    assert _resolve({}, otlp_traces_endpoint="http://localhost:4318/v1/traces") == (
        "http://localhost:4318/v1/traces"
    )
    assert _resolve({"otlp_traces_endpoint": "http://[::1]:1/x"}, otlp_traces_endpoint=None) is None
    assert _resolve({}) is None


@pytest.mark.parametrize(
    "bad",
    [
        "https://127.0.0.1:4318/v1/traces",  # not http
        "grpc://127.0.0.1:4317",
        "http://10.1.2.3:4318/v1/traces",  # not loopback
        "http://collector.example:4318/v1/traces",
        "http://127.0.0.1/v1/traces",  # no port
        "http://127.0.0.1:99999/v1/traces",
        "http://u:p@127.0.0.1:4318/v1/traces",
        "127.0.0.1:4318",
        4318,
        True,
    ],
)
@pytest.mark.parametrize("where", ["defaults", "engine"])
def test_bad_endpoint_refused(bad: object, where: str) -> None:
    """One line naming the key, the engine and the value."""
    table = {"otlp_traces_endpoint": bad}
    with pytest.raises(SimConfigError, match=r"engines\.e0\.otlp_traces_endpoint") as err:
        _resolve(table) if where == "defaults" else _resolve({}, **table)
    assert repr(bad) in str(err.value)


@pytest.mark.parametrize("bad", [0, -1, 61, "1", True, None])
def test_bad_export_interval_refused(bad: object) -> None:
    with pytest.raises(SimConfigError, match=r"engines\.e0\.otlp_export_interval_s") as err:
        _resolve({}, otlp_traces_endpoint="http://127.0.0.1:1/x", otlp_export_interval_s=bad)
    assert repr(bad) in str(err.value)


def test_export_interval_accepted() -> None:
    doc = fleet_document([{"iid": "e0", "role": "mixed", "model": "m"}], {"e0": 18001})
    cfg = sim_config({"otlp_export_interval_s": 60}, e0={})
    (s,) = resolve_engines(FleetConfig.model_validate(doc), cfg)
    assert s.otlp_export_interval_s == 60.0
    (t,) = resolve_engines(FleetConfig.model_validate(doc), sim_config({}, e0={}))
    assert t.otlp_export_interval_s == 0.5


def test_span_drop_every_fault() -> None:
    """An integer >= 1, cleared by null; anything else is refused naming the fault."""
    assert Faults().merged({"span_drop_every": 2}).span_drop_every == 2
    assert Faults(span_drop_every=3).merged({"span_drop_every": None}).span_drop_every is None
    for bad in (0, -2, 1.5, "2", True):
        with pytest.raises(SimConfigError, match="span_drop_every"):
            Faults().merged({"span_drop_every": bad})
