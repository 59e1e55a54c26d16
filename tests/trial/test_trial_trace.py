"""Reading a production trace (``narwhal_trial.workload._trace``): the formats, detection, the
window, the clipping to a context limit. The refusals are in test_trial_trace_errors.py."""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

import pytest

from narwhal_trial._errors import TrialUsageError
from narwhal_trial.workload._trace import (
    DEFAULT_BLOCK_TOKENS,
    TRACE_FORMATS,
    Trace,
    TraceError,
    TraceRequest,
    clipped,
    detect_format,
    longest,
    over_limit,
    read_trace,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "traces"
BURST_HEADER = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
AZURE_HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens\n"


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode())
    return path


def offsets(trace: Trace) -> list[float]:
    return [r.offset_s for r in trace.requests]


def test_formats_and_defaults() -> None:
    assert TRACE_FORMATS == ("mooncake", "burstgpt", "azure")
    assert DEFAULT_BLOCK_TOKENS == 512
    assert issubclass(TraceError, TrialUsageError)
    assert TraceError("x").exit_code == 1


def test_example_mooncake() -> None:
    """The sample: 15 rows, hash_ids kept (one row without them), ms read as seconds."""
    path = EXAMPLES / "mooncake.jsonl"
    trace = read_trace(path)
    assert trace.format == "mooncake"
    assert (trace.rows, trace.dropped_failures, len(trace.requests)) == (15, 0, 15)
    assert trace.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert trace.path == str(path)
    assert trace.block_tokens == 512
    first = trace.requests[0]
    assert first == TraceRequest(0.0, 6955, 52, tuple(range(14)), row=1)
    assert trace.requests[8].offset_s == pytest.approx(10.0025)  # a float timestamp, in ms
    assert trace.requests[9].hash_ids is None
    assert [r.row for r in trace.requests] == list(range(1, 16))
    assert offsets(trace) == sorted(offsets(trace))


def test_example_burstgpt_drops_failures() -> None:
    """Rows 5 and 13 have Response tokens 0: dropped and counted; rows are line numbers."""
    trace = read_trace(EXAMPLES / "burstgpt.csv")
    assert trace.format == "burstgpt"
    assert (trace.rows, trace.dropped_failures, len(trace.requests)) == (15, 2, 13)
    assert 5 not in [r.row for r in trace.requests]
    assert 13 not in [r.row for r in trace.requests]
    assert trace.requests[0] == TraceRequest(0.0, 472, 18, None, row=2)
    assert trace.requests[1].offset_s == 40.0  # seconds after the first request (at 5 s)
    assert all(r.hash_ids is None for r in trace.requests)


def test_example_azure_datetimes() -> None:
    """Seven fractional digits, read exactly (to the 100 ns of the source)."""
    trace = read_trace(EXAMPLES / "azure.csv")
    assert trace.format == "azure"
    assert (trace.rows, len(trace.requests)) == (15, 15)
    assert trace.requests[1].offset_s == pytest.approx(4.314579, abs=1e-12)
    assert trace.requests[6].offset_s == trace.requests[7].offset_s  # equal stamps are fine
    assert trace.requests[-1] == TraceRequest(33.318411, 760, 62, None, row=16)


def test_detect_format() -> None:
    """The first line decides: a JSON object, or a header with one format's columns."""
    p = Path("t")
    assert detect_format(p, b'{"timestamp": 0}\n{"x"') == "mooncake"
    assert detect_format(p, BURST_HEADER.encode()) == "burstgpt"
    assert detect_format(p, b"\xef\xbb\xbf" + AZURE_HEADER.encode() + b"1,2,3\n") == "azure"
    assert detect_format(p, b" Request tokens , Timestamp,Response tokens\r\n") == "burstgpt"


@pytest.mark.parametrize(
    ("head", "seen"),
    [
        (b"time,in,out\n", "'time,in,out'"),
        (b"", "''"),
        (b"TIMESTAMP,ContextTokens\n", "'TIMESTAMP,ContextTokens'"),
        (b"[1, 2]\n", "'[1, 2]'"),
    ],
)
def test_detect_format_unknown(head: bytes, seen: str) -> None:
    with pytest.raises(TraceError) as info:
        detect_format(Path("data/t.csv"), head)
    message = info.value.message
    assert message.startswith("trace data/t.csv: cannot tell its format from its first line")
    assert seen in message
    assert "pass --trace-format" in message
    assert "\n" not in message


def test_detect_format_ambiguous() -> None:
    head = b"Timestamp,Request tokens,Response tokens,TIMESTAMP,ContextTokens,GeneratedTokens\n"
    with pytest.raises(TraceError, match=r"^trace t.csv: .*both BurstGPT's and Azure's columns"):
        detect_format(Path("t.csv"), head)


def test_explicit_format_skips_detection(tmp_path: Path) -> None:
    """An explicit format is used as given (here a file whose header detection would refuse)."""
    header = "TIMESTAMP,ContextTokens,GeneratedTokens,Timestamp,Request tokens,Response tokens\n"
    path = write(tmp_path, "t.csv", header + "0,5,6,1,7,8\n")
    with pytest.raises(TraceError, match="both"):
        read_trace(path)
    azure = read_trace(path, trace_format="azure")
    assert azure.requests == (TraceRequest(0.0, 5, 6, None, row=2),)
    burst = read_trace(path, trace_format="burstgpt")
    assert burst.requests == (TraceRequest(0.0, 7, 8, None, row=2),)


def test_window_start_duration_limit_and_rebase(tmp_path: Path) -> None:
    """start <= t < start + duration, relative to the first request; then the limit; then the
    first kept request is at 0."""
    lines = "".join(f"{t},M,{10 + i},{5 + i},0,API log\n" for i, t in enumerate([7, 8, 9, 10, 12]))
    path = write(tmp_path, "b.csv", BURST_HEADER + lines)  # relative times 0, 1, 2, 3, 5
    trace = read_trace(path, start_s=1.0, duration_s=2.0)
    assert offsets(trace) == [0.0, 1.0]  # t = 1 (kept: start inclusive) and 2; t = 3 excluded
    assert [r.input_tokens for r in trace.requests] == [11, 12]
    assert (trace.rows, trace.start_s, trace.duration_s, trace.limit) == (5, 1.0, 2.0, None)
    assert offsets(read_trace(path, start_s=2.0)) == [0.0, 1.0, 3.0]
    limited = read_trace(path, start_s=1.0, limit=2)
    assert [r.row for r in limited.requests] == [3, 4]
    assert limited.rows == 5  # the whole file is read and counted whatever the window
    assert offsets(read_trace(path, limit=1)) == [0.0]


def test_window_is_relative_to_the_first_request_after_failures(tmp_path: Path) -> None:
    """A leading failure does not set time zero."""
    path = write(tmp_path, "b.csv", BURST_HEADER + "3,M,10,0,10,x\n5,M,10,4,14,x\n6,M,1,1,2,x\n")
    trace = read_trace(path, start_s=1.0)
    assert trace.dropped_failures == 1
    assert [(r.row, r.offset_s) for r in trace.requests] == [(4, 0.0)]


def test_failure_rows_may_have_no_request_tokens(tmp_path: Path) -> None:
    path = write(tmp_path, "b.csv", BURST_HEADER + "1,M,0,0,0,x\n2,M,3,4,7,x\n")
    assert read_trace(path).dropped_failures == 1


def test_azure_timestamp_forms(tmp_path: Path) -> None:
    """Up to 9 fractional digits, none, a T, a UTC offset or Z: all read to the nanosecond."""
    text = AZURE_HEADER + (
        "2024-05-10 00:00:00,1,1\n"
        "2024-05-10 00:00:00.1,1,1\n"
        "2024-05-10T00:00:00.123456789,1,1\n"
        "2024-05-10 00:00:01.0000001Z,1,1\n"
        "2024-05-10 02:00:02.5+02:00,1,1\n"  # 00:00:02.5 UTC
        "2024-05-09 19:00:03-0500,1,1\n"  # 00:00:03 UTC
    )
    trace = read_trace(write(tmp_path, "a.csv", text))
    assert offsets(trace) == [0.0, 0.1, 0.123456789, 1.0000001, 2.5, 3.0]


def test_azure_seconds(tmp_path: Path) -> None:
    path = write(tmp_path, "a.csv", AZURE_HEADER + "100.5,3,4\n101,5,6.0\n")
    trace = read_trace(path)
    assert [(r.offset_s, r.input_tokens, r.output_tokens) for r in trace.requests] == [
        (0.0, 3, 4),
        (0.5, 5, 6),
    ]


def test_crlf_bom_blank_lines_and_extra_keys(tmp_path: Path) -> None:
    """CRLF endings, a BOM, blank lines (skipped but counted in row numbers), extra keys."""
    jsonl = (
        '{"timestamp": 1000, "input_length": 600, "output_length": 2, "hash_ids": [], "x": 1}\r\n'
        "\r\n"
        '{"timestamp": 1500.5, "input_length": 5.0, "output_length": 1, "hash_ids": null}\r\n'
    )
    trace = read_trace(write(tmp_path, "m.jsonl", jsonl))
    assert trace.requests == (
        TraceRequest(0.0, 600, 2, (), row=1),
        TraceRequest(0.5005, 5, 1, None, row=3),
    )
    csv_text = "\ufeff" + BURST_HEADER.replace("\n", "\r\n") + "\r\n2,M,3,4,7,x\r\n"
    burst = read_trace(write(tmp_path, "b.csv", csv_text))
    assert burst.requests == (TraceRequest(0.0, 3, 4, None, row=3),)


def test_block_tokens_bounds_hash_ids(tmp_path: Path) -> None:
    """hash_ids may not describe more blocks than the input fills: 3 blocks need > 2 x B."""
    row = '{"timestamp": 0, "input_length": 300, "output_length": 1, "hash_ids": [1, 2, 3]}\n'
    path = write(tmp_path, "m.jsonl", row)
    trace = read_trace(path, block_tokens=100)
    assert trace.block_tokens == 100
    assert trace.requests[0].hash_ids == (1, 2, 3)
    with pytest.raises(TraceError, match="hash_ids: 3 blocks of 512 tokens"):
        read_trace(path)


def test_window_arguments_are_checked(tmp_path: Path) -> None:
    path = EXAMPLES / "azure.csv"
    for kwargs in (
        {"start_s": -1.0},
        {"start_s": float("nan")},
        {"duration_s": 0.0},
        {"duration_s": float("inf")},
        {"limit": 0},
        {"block_tokens": 0},
    ):
        with pytest.raises(TrialUsageError):
            read_trace(path, **kwargs)


def test_dataclasses_are_frozen_with_slots() -> None:
    request = TraceRequest(0.0, 1, 1)
    assert not hasattr(request, "__dict__")
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.input_tokens = 2  # type: ignore[misc]
    with pytest.raises(ValueError, match="at least 1"):
        TraceRequest(0.0, 0, 1)
    assert not hasattr(read_trace(EXAMPLES / "azure.csv"), "__dict__")


def _trace(*requests: TraceRequest, block_tokens: int = 512) -> Trace:
    return Trace(
        "t", "0" * 64, "mooncake", requests, len(requests), 0, 0.0, None, None, block_tokens
    )


def test_longest_and_over_limit() -> None:
    a = TraceRequest(0.0, 100, 50, row=1)  # 150 tokens
    b = TraceRequest(1.0, 120, 40, row=2)  # 160
    c = TraceRequest(2.0, 10, 151, row=3)  # 161
    trace = _trace(a, b, c)
    assert longest(trace) is c
    assert longest(_trace(a, b)) is b
    assert longest(_trace(TraceRequest(0.0, 1, 9), TraceRequest(0.0, 9, 1))).input_tokens == 1
    assert over_limit(trace, 161) == []
    assert over_limit(trace, 160) == [c]
    assert over_limit(trace, 159) == [b, c]
    assert over_limit(trace, 149) == [a, b, c]
    with pytest.raises(ValueError, match="no request"):
        longest(_trace())


def test_clipped_keeps_output_then_input() -> None:
    """Input reduced first, keeping the output; an output that alone does not fit becomes
    max_model_len - 1 with 1 input token. hash_ids keep the blocks the input still fills."""
    fits = TraceRequest(0.0, 90, 10, (1,), row=1)
    long_input = TraceRequest(1.0, 350, 20, (1, 2, 3, 4), row=2)
    long_output = TraceRequest(2.0, 50, 100, (5,), row=3)
    exact_output = TraceRequest(3.0, 5, 99, None, row=4)
    trace = _trace(fits, long_input, long_output, exact_output, block_tokens=64)
    out = clipped(trace, 100)
    assert out.requests[0] is fits
    assert out.requests[1] == TraceRequest(1.0, 80, 20, (1, 2), row=2)  # 80 tokens: 2 blocks
    assert out.requests[2] == TraceRequest(2.0, 1, 99, (5,), row=3)
    assert out.requests[3] == TraceRequest(3.0, 1, 99, None, row=4)
    assert over_limit(out, 100) == []
    assert dataclasses.replace(out, requests=trace.requests) == trace  # the rest is kept
    with pytest.raises(TrialUsageError, match="at least 2"):
        clipped(trace, 1)
