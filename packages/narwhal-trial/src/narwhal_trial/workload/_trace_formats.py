"""The per-format row readers of a production trace (``_trace``), and the trace's error.

Each reader turns a file's bytes into raw rows ``(row, time_ns, input_tokens, output_tokens,
hash_ids)`` in file order, checking every row as it goes; ``_trace`` windows and rebases them.

- ``row`` is the 1-based line number in the file (a CSV's header is line 1); blank lines are
  skipped but counted, so a message's row is the line an editor shows.
- ``time_ns`` is the row's timestamp in integer nanoseconds on the file's own scale (Mooncake:
  milliseconds, BurstGPT: seconds, Azure: a datetime read as UTC when it has no offset, or a
  number of seconds). Timestamps must not be negative and must not go back: a row earlier than
  the one before it is refused (equal timestamps are fine).
- Lengths are integers (``12`` or ``12.0``) of at least 1. The one exception: a BurstGPT row whose
  ``Response tokens`` is 0 is a failed request in the source; it is given with 0 output tokens and
  ``_trace`` drops and counts it.

Every refusal is a one-line ``TraceError``: ``trace FILE row N: FIELD: problem``.
"""

from __future__ import annotations

import csv
import functools
import io
import math
import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import orjson

from narwhal_trial._errors import TrialUsageError

RawRow = tuple[int, int, int, int, tuple[int, ...] | None]
"""``(row, time_ns, input_tokens, output_tokens, hash_ids)``; output 0: a BurstGPT failure."""
RowReader = Callable[[str, bytes, int], Iterator[RawRow]]
"""``reader(label, data, block_tokens)``: the raw rows of a file's bytes, in file order."""

BURSTGPT_COLUMNS = ("Timestamp", "Request tokens", "Response tokens")
AZURE_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")

_NS = 1_000_000_000
_DATETIME = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?\s*(Z|[+-]\d{2}:?\d{2})?"
)
_SHOWN = 40


class TraceError(TrialUsageError):
    """A trace that cannot be used: unreadable, of an unknown format, a bad row, an empty window.

    The message is one line naming the file and, for a bad row, its line number and field."""


def shown(value: object) -> str:
    """A value as a message quotes it: ``repr`` on one line, cut to about 40 characters."""
    text = repr(value)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


def row_error(label: str, row: int, field: str | None, problem: str) -> TraceError:
    """``trace FILE row N: FIELD: problem`` (no FIELD for a row that is not a row at all)."""
    where = f"trace {label} row {row}: "
    return TraceError(where + (f"{field}: {problem}" if field else problem))


class _Order:
    """The time-order check: no negative timestamp, no row earlier than the one before."""

    def __init__(self, label: str, field: str) -> None:
        self.label, self.field = label, field
        self.prev_ns: int | None = None
        self.prev_row = 0
        self.prev_text = ""

    def check(self, row: int, ns: int, text: str) -> int:
        if ns < 0:
            raise row_error(self.label, row, self.field, f"negative ({text})")
        if self.prev_ns is not None and ns < self.prev_ns:
            raise row_error(
                self.label,
                row,
                self.field,
                f"{text} is earlier than row {self.prev_row}'s {self.prev_text}; "
                "a trace must be in time order",
            )
        self.prev_ns, self.prev_row, self.prev_text = ns, row, text
        return ns


# --- Mooncake JSONL ---------------------------------------------------------------------------


def _json_int(label: str, row: int, doc: dict[str, Any], key: str) -> int:
    if key not in doc:
        raise row_error(label, row, key, "missing")
    value = doc[key]
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise row_error(label, row, key, f"not an integer ({shown(value)})")
    if value < 1:
        raise row_error(label, row, key, f"must be at least 1, got {value}")
    return value


def _hash_ids(
    label: str, row: int, value: object, input_tokens: int, block_tokens: int
) -> tuple[int, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list):
        raise row_error(label, row, "hash_ids", f"not a list ({shown(value)})")
    for i, item in enumerate(value):
        if isinstance(item, bool) or not isinstance(item, int) or item < 0:
            raise row_error(
                label, row, "hash_ids", f"item {i} is not a non-negative integer ({shown(item)})"
            )
    needed = -(-input_tokens // block_tokens)
    if len(value) > needed:
        raise row_error(
            label,
            row,
            "hash_ids",
            f"{len(value)} blocks of {block_tokens} tokens are more than input_length "
            f"{input_tokens} fills ({needed})",
        )
    return tuple(value)


def mooncake_rows(label: str, data: bytes, block_tokens: int) -> Iterator[RawRow]:
    """Mooncake JSONL: ``timestamp`` (ms, integer or float), ``input_length``, ``output_length``,
    optional ``hash_ids`` (at most as many blocks as the input fills); other keys are ignored."""
    order = _Order(label, "timestamp")
    for row, line in enumerate(data.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            doc = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise row_error(label, row, None, f"not JSON ({exc})") from exc
        if not isinstance(doc, dict):
            raise row_error(label, row, None, f"not a JSON object ({type(doc).__name__})")
        if "timestamp" not in doc:
            raise row_error(label, row, "timestamp", "missing")
        ts = doc["timestamp"]
        if isinstance(ts, bool) or not isinstance(ts, int | float) or not math.isfinite(ts):
            raise row_error(label, row, "timestamp", f"not a number ({shown(ts)})")
        ns = ts * 1_000_000 if isinstance(ts, int) else round(ts * 1e6)
        order.check(row, ns, f"{ts} ms")
        input_tokens = _json_int(label, row, doc, "input_length")
        output_tokens = _json_int(label, row, doc, "output_length")
        ids = _hash_ids(label, row, doc.get("hash_ids"), input_tokens, block_tokens)
        yield row, ns, input_tokens, output_tokens, ids


# --- CSV (BurstGPT, Azure) --------------------------------------------------------------------


def _csv(label: str, data: bytes, required: tuple[str, ...]) -> Iterator[tuple[int, list[str]]]:
    """The data rows of a CSV file, as ``(line, [the required columns' texts])``."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise row_error(label, line, None, "not UTF-8 text") from exc
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = [name.strip() for name in next(reader)]
        where = [header.index(name) if name in header else -1 for name in required]
        for name, at in zip(required, where, strict=True):
            if at < 0:
                raise row_error(
                    label, 1, name, f"missing column (the header has {', '.join(header)})"
                )
        for fields in reader:
            if not fields:
                continue
            if len(fields) != len(header):
                raise row_error(
                    label,
                    reader.line_num,
                    None,
                    f"{len(fields)} columns where the header has {len(header)}",
                )
            yield reader.line_num, [fields[at] for at in where]
    except csv.Error as exc:
        raise row_error(label, reader.line_num, None, f"not CSV ({exc})") from exc


def _int_text(label: str, row: int, field: str, text: str, minimum: int = 1) -> int:
    s = text.strip()
    try:
        value = int(s)
    except ValueError:
        try:
            f = float(s)
        except ValueError:
            f = math.nan
        if not (math.isfinite(f) and f.is_integer()):
            raise row_error(label, row, field, f"not an integer ({shown(text)})") from None
        value = int(f)
    if value < minimum:
        raise row_error(label, row, field, f"must be at least {minimum}, got {value}")
    return value


def _seconds_ns(label: str, row: int, field: str, text: str) -> int | None:
    """A number of seconds as nanoseconds; None when ``text`` is not a number."""
    try:
        seconds = float(text)
    except ValueError:
        return None
    if not math.isfinite(seconds):
        raise row_error(label, row, field, f"not a finite number ({shown(text)})")
    return round(seconds * _NS)


def burstgpt_rows(label: str, data: bytes, block_tokens: int) -> Iterator[RawRow]:
    """BurstGPT CSV: ``Timestamp`` (s), ``Request tokens``, ``Response tokens`` (0: a failure,
    given as 0 output tokens); other columns are ignored."""
    del block_tokens  # BurstGPT has no prefix blocks
    order = _Order(label, "Timestamp")
    for row, (ts, request, response) in _csv(label, data, BURSTGPT_COLUMNS):
        ns = _seconds_ns(label, row, "Timestamp", ts)
        if ns is None:
            raise row_error(label, row, "Timestamp", f"not a number ({shown(ts)})")
        order.check(row, ns, ts.strip())
        output_tokens = _int_text(label, row, "Response tokens", response, minimum=0)
        least = 1 if output_tokens else 0  # a failure is dropped whatever its request length
        input_tokens = _int_text(label, row, "Request tokens", request, least)
        yield row, ns, input_tokens, output_tokens, None


@functools.lru_cache(maxsize=1024)
def _minute_s(year: str, month: str, day: str, hour: str, minute: str, offset: str | None) -> int:
    """Seconds from the epoch to a minute (UTC without an offset); ValueError when there is no
    such minute. Cached: a trace's consecutive rows mostly share their minute."""
    tz = UTC
    if offset and offset != "Z":
        sign = -1 if offset[0] == "-" else 1
        digits = offset[1:].replace(":", "")
        tz = timezone(sign * timedelta(hours=int(digits[:2]), minutes=int(digits[2:])))
    moment = datetime(int(year), int(month), int(day), int(hour), int(minute), tzinfo=tz)
    return (moment - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(seconds=1)


def _datetime_ns(label: str, row: int, text: str) -> int | None:
    """A datetime with up to 9 fractional digits and an optional UTC offset, as ns since the
    epoch (UTC when it has no offset); None when ``text`` does not look like one."""
    m = _DATETIME.fullmatch(text)
    if m is None:
        return None
    year, month, day, hour, minute, second, fraction, offset = m.groups()
    try:
        if int(second) > 59:
            raise ValueError("second must be in 0..59")
        whole = _minute_s(year, month, day, hour, minute, offset) + int(second)
    except ValueError as exc:
        raise row_error(label, row, "TIMESTAMP", f"not a datetime ({shown(text)}: {exc})") from exc
    return whole * _NS + int((fraction or "").ljust(9, "0"))


def azure_rows(label: str, data: bytes, block_tokens: int) -> Iterator[RawRow]:
    """Azure LLM inference trace CSV: ``TIMESTAMP`` (a datetime such as ``2023-11-16
    18:15:46.6805900``, or a number of seconds: one or the other in a whole file),
    ``ContextTokens``, ``GeneratedTokens``."""
    del block_tokens  # the Azure trace has no prefix blocks
    order = _Order(label, "TIMESTAMP")
    datetimes: bool | None = None
    for row, (ts, context, generated) in _csv(label, data, AZURE_COLUMNS):
        text = ts.strip()
        ns = _datetime_ns(label, row, text)
        is_datetime = ns is not None
        if ns is None:
            ns = _seconds_ns(label, row, "TIMESTAMP", text)
        if ns is None:
            raise row_error(
                label,
                row,
                "TIMESTAMP",
                f"not a datetime (YYYY-MM-DD HH:MM:SS.fffffff) nor seconds ({shown(ts)})",
            )
        if datetimes is None:
            datetimes = is_datetime
        elif datetimes != is_datetime:
            this, earlier = ("seconds", "datetimes") if datetimes else ("a datetime", "seconds")
            problem = f"{this} ({shown(ts)}) where earlier rows have {earlier}"
            raise row_error(label, row, "TIMESTAMP", problem)
        order.check(row, ns, text)
        input_tokens = _int_text(label, row, "ContextTokens", context)
        output_tokens = _int_text(label, row, "GeneratedTokens", generated)
        yield row, ns, input_tokens, output_tokens, None
