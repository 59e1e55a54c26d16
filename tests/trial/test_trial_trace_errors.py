"""The refusals of ``read_trace``: each a one-line TraceError (exit 1) naming the file, and for a
bad row its line number and field."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from narwhal_trial._errors import TrialUsageError
from narwhal_trial.workload._trace import TraceError, TraceFormat, read_trace

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "traces"
BURST = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
AZURE = "TIMESTAMP,ContextTokens,GeneratedTokens\n"


def mooncake(ts: object = 0, inp: object = 10, out: object = 5, **extra: str) -> str:
    keys = [f'"timestamp": {ts}', f'"input_length": {inp}', f'"output_length": {out}']
    keys += [f'"{k}": {v}' for k, v in extra.items()]
    return "{" + ", ".join(keys) + "}\n"


FORMATS: dict[str, TraceFormat] = {"m.jsonl": "mooncake", "b.csv": "burstgpt", "a.csv": "azure"}
GOOD_MOONCAKE = mooncake(0) + mooncake(1000)
GOOD_BURST = BURST + "1,M,10,5,15,x\n2,M,10,5,15,x\n"  # rows 2, 3
GOOD_AZURE = AZURE + "2023-11-16 18:15:46.6805900,10,5\n"  # row 2


def refused(path: Path, **kwargs: object) -> str:
    """The message of read_trace's TraceError on ``path``: exit 1, usage error, one line."""
    with pytest.raises(TraceError) as info:
        read_trace(path, **kwargs)  # type: ignore[arg-type]
    error = info.value
    assert isinstance(error, TrialUsageError)
    assert error.exit_code == 1
    assert "\n" not in error.message
    assert str(path) in error.message
    return error.message


# (name, file text, expected message after "trace FILE ")
BAD_ROWS: list[tuple[str, str, str]] = [
    # Mooncake
    ("m.jsonl", GOOD_MOONCAKE + "{not json\n", "row 3: not JSON ("),
    ("m.jsonl", GOOD_MOONCAKE + "[1, 2]\n", "row 3: not a JSON object (list)"),
    ("m.jsonl", '{"input_length": 1, "output_length": 1}\n', "row 1: timestamp: missing"),
    ("m.jsonl", GOOD_MOONCAKE + '{"timestamp": 2000, "output_length": 1}\n',
     "row 3: input_length: missing"),
    ("m.jsonl", mooncake(0, out='"5"'), "row 1: output_length: not an integer ('5')"),
    ("m.jsonl", mooncake(0, inp=2.5), "row 1: input_length: not an integer (2.5)"),
    ("m.jsonl", mooncake(0, inp="true"), "row 1: input_length: not an integer (True)"),
    ("m.jsonl", mooncake('"now"'), "row 1: timestamp: not a number ('now')"),
    ("m.jsonl", mooncake(-5), "row 1: timestamp: negative (-5 ms)"),
    ("m.jsonl", mooncake(2000) + mooncake(1000.5),
     "row 2: timestamp: 1000.5 ms is earlier than row 1's 2000 ms; a trace must be in time order"),
    ("m.jsonl", mooncake(0, inp=0), "row 1: input_length: must be at least 1, got 0"),
    ("m.jsonl", mooncake(0, out=-3), "row 1: output_length: must be at least 1, got -3"),
    ("m.jsonl", mooncake(0, hash_ids="[1, -2]"),
     "row 1: hash_ids: item 1 is not a non-negative integer (-2)"),
    ("m.jsonl", mooncake(0, hash_ids='"abc"'), "row 1: hash_ids: not a list ('abc')"),
    ("m.jsonl", mooncake(0, inp=513, hash_ids="[1, 2, 3]"),
     "row 1: hash_ids: 3 blocks of 512 tokens are more than input_length 513 fills (2)"),
    # BurstGPT
    ("b.csv", GOOD_BURST + "3,M,10,5\n", "row 4: 4 columns where the header has 6"),
    ("b.csv", BURST + "1,M,10,5,15,x\n" * 6 + "7,M,abc,5,15,x\n",
     "row 8: Request tokens: not an integer ('abc')"),
    ("b.csv", GOOD_BURST + "3,M,10,2.5,15,x\n", "row 4: Response tokens: not an integer ('2.5')"),
    ("b.csv", GOOD_BURST + "soon,M,10,5,15,x\n", "row 4: Timestamp: not a number ('soon')"),
    ("b.csv", GOOD_BURST + "nan,M,10,5,15,x\n", "row 4: Timestamp: not a finite number ('nan')"),
    ("b.csv", "Timestamp,Model,Request tokens,Total tokens\n1,M,2,3\n",
     "row 1: Response tokens: missing column (the header has Timestamp, Model, Request tokens, "
     "Total tokens)"),
    ("b.csv", BURST + "-1,M,10,5,15,x\n", "row 2: Timestamp: negative (-1)"),
    ("b.csv", GOOD_BURST + "1.5,M,10,5,15,x\n",
     "row 4: Timestamp: 1.5 is earlier than row 3's 2; a trace must be in time order"),
    ("b.csv", GOOD_BURST + "3,M,0,5,5,x\n", "row 4: Request tokens: must be at least 1, got 0"),
    ("b.csv", GOOD_BURST + "3,M,10,-1,9,x\n", "row 4: Response tokens: must be at least 0, got -1"),
    ("b.csv", GOOD_BURST + '3,M,"10,5,15,x\n', "row 4: 3 columns where the header has 6"),
    # Azure
    ("a.csv", "TIMESTAMP,GeneratedTokens\n1,2\n",
     "row 1: ContextTokens: missing column (the header has TIMESTAMP, GeneratedTokens)"),
    ("a.csv", GOOD_AZURE + "2023-11-16 18:15:46.6805899,10,5\n",
     "row 3: TIMESTAMP: 2023-11-16 18:15:46.6805899 is earlier than row 2's "
     "2023-11-16 18:15:46.6805900; a trace must be in time order"),
    ("a.csv", GOOD_AZURE + "2023-11-16 18:15:47.1234567890,10,5\n",
     "row 3: TIMESTAMP: not a datetime (YYYY-MM-DD HH:MM:SS.fffffff) nor seconds "
     "('2023-11-16 18:15:47.1234567890')"),
    ("a.csv", GOOD_AZURE + "2023-13-16 18:15:47,10,5\n",
     "row 3: TIMESTAMP: not a datetime ('2023-13-16 18:15:47': month must be in 1..12)"),
    ("a.csv", GOOD_AZURE + "2023-11-16 18:15:60,10,5\n",
     "row 3: TIMESTAMP: not a datetime ('2023-11-16 18:15:60': second must be in 0..59)"),
    ("a.csv", GOOD_AZURE + "2023-11-16 24:00:00,10,5\n",
     "row 3: TIMESTAMP: not a datetime ('2023-11-16 24:00:00': hour must be in 0..23)"),
    ("a.csv", GOOD_AZURE + "1700000000,10,5\n",
     "row 3: TIMESTAMP: seconds ('1700000000') where earlier rows have datetimes"),
    ("a.csv", AZURE + "5,10,5\n2023-11-16 18:15:47,10,5\n",
     "row 3: TIMESTAMP: a datetime ('2023-11-16 18:15:47') where earlier rows have seconds"),
    ("a.csv", AZURE + "-0.5,10,5\n", "row 2: TIMESTAMP: negative (-0.5)"),
    ("a.csv", GOOD_AZURE + "2023-11-16 18:15:47,10,0\n",
     "row 3: GeneratedTokens: must be at least 1, got 0"),
    ("a.csv", GOOD_AZURE + "2023-11-16 18:15:47,-7,3\n",
     "row 3: ContextTokens: must be at least 1, got -7"),
    ("a.csv", GOOD_AZURE + "2023-11-16 18:15:47,,3\n", "row 3: ContextTokens: not an integer ('')"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "text", "expected"), BAD_ROWS)
def test_bad_row(tmp_path: Path, name: str, text: str, expected: str) -> None:
    """Read with the format given (a header without a column fails detection otherwise)."""
    path = tmp_path / name
    path.write_text(text)
    message = refused(path, trace_format=FORMATS[name])
    if expected.endswith("("):  # the parser's own words follow
        assert message.startswith(f"trace {path} {expected}")
        assert message.endswith(")")
    else:
        assert message == f"trace {path} {expected}"
    if "missing column" not in expected:
        assert refused(path) == message  # detected as the same format


def test_spec_message_shape(tmp_path: Path) -> None:
    """The documented example, on a copy of the sample with row 7's Request tokens spoiled."""
    lines = (EXAMPLES / "burstgpt.csv").read_text().splitlines(keepends=True)
    fields = lines[6].split(",")
    fields[2] = "abc"
    lines[6] = ",".join(fields)
    path = tmp_path / "burstgpt.csv"
    path.write_text("".join(lines))
    assert refused(path) == f"trace {path} row 7: Request tokens: not an integer ('abc')"


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "b.csv"
    path.write_bytes(GOOD_BURST.encode() + b"3,M\xff,10,5,15,x\n")
    assert refused(path) == f"trace {path} row 4: not UTF-8 text"


def test_long_values_are_cut(tmp_path: Path) -> None:
    path = tmp_path / "b.csv"
    path.write_text(GOOD_BURST + "3,M," + "9" * 30 + "x" * 30 + ",5,15,x\n")
    message = refused(path)
    assert message.endswith("...)")
    assert len(message) < len(str(path)) + 120


@pytest.mark.parametrize(
    ("text", "fmt", "expected"),
    [
        ("", None, "trace {p} is empty"),
        ("\n  \n", None, "trace {p} is empty"),
        (BURST, None, "trace {p} has no data row"),
        (AZURE + "\n", None, "trace {p} has no data row"),
        ("\n\n", "mooncake", "trace {p} is empty"),
        (
            BURST + "1,M,10,0,10,x\n2,M,3,0,3,x\n",
            None,
            "trace {p}: all 2 rows are failures (Response tokens 0): no request left",
        ),
    ],
)
def test_empty(tmp_path: Path, text: str, fmt: TraceFormat | None, expected: str) -> None:
    path = tmp_path / "t.csv"
    path.write_text(text)
    assert refused(path, trace_format=fmt) == expected.format(p=path)


def test_empty_window(tmp_path: Path) -> None:
    """Beyond the last request, or between two requests: the window, the file and its size."""
    path = tmp_path / "b.csv"
    path.write_text(BURST + "10,M,1,1,2,x\n12,M,1,1,2,x\n20.25,M,1,1,2,x\n")  # 0, 2, 10.25 s
    assert (
        refused(path, start_s=3, duration_s=7.25)
        == f"no request between 3 s and 10.25 s of {path} (3 rows over 10.25 s)"
    )
    after = refused(path, start_s=10.5)
    assert after == f"no request at or after 10.5 s of {path} (3 rows over 10.25 s)"
    assert len(read_trace(path, start_s=3, duration_s=7.5).requests) == 1  # 10.25 < 10.5


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "absent.csv"
    assert refused(path) == f"cannot read trace {path}: No such file or directory"


def test_under_a_file(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    path = tmp_path / "f" / "t.csv"
    assert refused(path) == f"cannot read trace {path}: Not a directory"


def test_folder(tmp_path: Path) -> None:
    assert refused(tmp_path) == f"cannot read trace {tmp_path}: not a regular file"


def test_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    path = tmp_path / "fifo"
    os.mkfifo(path)
    assert refused(path) == f"cannot read trace {path}: not a regular file"


def test_symlink_is_not_followed(tmp_path: Path) -> None:
    path = tmp_path / "link.csv"
    path.symlink_to(EXAMPLES / "azure.csv")
    assert refused(path) == f"cannot read trace {path}: it is a symlink (not followed)"


def test_detection_failure_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "t.txt"
    path.write_text("hello\n")
    message = refused(path)
    assert message.startswith(f"trace {path}: cannot tell its format from its first line")
    assert message.endswith("pass --trace-format (mooncake, burstgpt or azure)")


def test_wrong_explicit_format(tmp_path: Path) -> None:
    """A Mooncake file read as BurstGPT: its first line is no header with the columns."""
    path = tmp_path / "m.jsonl"
    path.write_text(GOOD_MOONCAKE)
    assert refused(path, trace_format="burstgpt").startswith(
        f'trace {path} row 1: Timestamp: missing column (the header has {{"timestamp": 0'
    )
