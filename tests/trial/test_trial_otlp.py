"""The trial's OTLP decoder against bytes opentelemetry-proto itself wrote, and the receiver
process: paths, content types, gzip, bad bodies, counts."""

from __future__ import annotations

import gzip
from pathlib import Path

import httpx
import orjson
import pytest

from narwhal_trial._errors import TrialError
from narwhal_trial.server._otlp import OtlpDecodeError, decode_export
from narwhal_trial.server._otlp_receiver import Receiver

# ExportTraceServiceRequest.SerializeToString() from opentelemetry-proto 1.x (the conformance
# tier's vLLM venv): one resource (service.name, service.instance.id=e0), one scope, a span
# llm_request (kind SERVER, flags 257, six attributes: string, int, double, a negative int, a bool,
# an array) and a span "other".
REAL_EXPORT = bytes.fromhex(
    "0af1020a400a210a0c736572766963652e6e616d6512110a0f766c6c6d2e6c6c6d5f656e67696e650a1b0a1373"
    "6572766963652e696e7374616e63652e696412040a02653012ac020a110a0f766c6c6d2e6c6c6d5f656e67696e"
    "6512fb010a10000102030405060708090a0b0c0d0e0f120800010203040506072a0b6c6c6d5f72657175657374"
    "300239158d7de24c797d18411557181e4d797d184a2c0a1167656e5f61692e726571756573742e696412170a15"
    "636d706c2d747269616c2d782d3030303030312d304a240a1e67656e5f61692e75736167652e636f6d706c6574"
    "696f6e5f746f6b656e73120218204a2f0a2267656e5f61692e6c6174656e63792e74696d655f746f5f66697273"
    "745f746f6b656e120921000000000000c03f4a120a036e6567120b18fbffffffffffffffff014a0a0a04666c61"
    "67120210014a110a03617272120a2a080a060a0473746f7085010101000012192a056f74686572390100000000"
    "000000410200000000000000"
)


def test_decodes_what_opentelemetry_proto_encoded() -> None:
    spans = decode_export(REAL_EXPORT)
    assert [s.name for s in spans] == ["llm_request", "other"]
    span = spans[0]
    assert (span.start_ns, span.end_ns) == (1764700000123456789, 1764700001123456789)
    assert span.resource == {"service.name": "vllm.llm_engine", "service.instance.id": "e0"}
    assert span.attributes == {
        "gen_ai.request.id": "cmpl-trial-x-000001-0",
        "gen_ai.usage.completion_tokens": 32,
        "gen_ai.latency.time_to_first_token": 0.125,
        "neg": -5,
        "flag": True,
        "arr": ["stop"],
    }
    assert (spans[1].start_ns, spans[1].end_ns, spans[1].attributes) == (1, 2, {})


@pytest.mark.parametrize("cut", [1, 7, 50, len(REAL_EXPORT) - 1])
def test_truncated_export_is_an_error(cut: int) -> None:
    with pytest.raises(OtlpDecodeError, match="truncated"):
        decode_export(REAL_EXPORT[:cut])


def test_unknown_wire_type_is_an_error() -> None:
    with pytest.raises(OtlpDecodeError, match="wire type 3"):
        decode_export(b"\x0b")


def _post(address: str, path: str, body: bytes, **headers: str) -> httpx.Response:
    kind = {"Content-Type": "application/x-protobuf"} | headers
    return httpx.post(f"http://{address}{path}", content=body, headers=kind, timeout=10)


def test_receiver_keeps_llm_request_spans_with_their_engine(tmp_path: Path) -> None:
    receiver = Receiver("127.0.0.1", 0, tmp_path)
    try:
        address = receiver.address
        assert address.startswith("127.0.0.1:") and not address.endswith(":0")
        assert _post(address, "/v1/traces/e7", REAL_EXPORT).status_code == 200
        assert _post(address, "/v1/traces", gzip.compress(REAL_EXPORT),
                     **{"Content-Encoding": "gzip"}).status_code == 200  # fmt: skip
        assert _post(address, "/v1/traces", b"\x0b").status_code == 400
        assert (
            _post(address, "/v1/traces", b"{}", **{"Content-Type": "application/json"}).status_code
            == 415
        )
        assert _post(address, "/v1/logs", REAL_EXPORT).status_code == 404
    finally:
        counts = receiver.stop()
    assert counts == {"exports": 2, "rejected": 1, "spans": 2, "other_spans": 2}
    lines = [orjson.loads(x) for x in receiver.spans_path.read_bytes().splitlines()]
    # the path names the engine; without it the resource's service.instance.id does
    assert [x["engine"] for x in lines] == ["e7", "e0"]
    assert lines[0]["attributes"]["gen_ai.latency.time_to_first_token"] == 0.125
    assert receiver.spans_path.stat().st_mode & 0o777 == 0o600


def test_receiver_that_cannot_listen_says_why(tmp_path: Path) -> None:
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(TrialError, match=f"--otlp-receiver 127.0.0.1:{port}: cannot listen"):
            Receiver("127.0.0.1", port, tmp_path)
