"""A production trace read into requests: the groundwork of ``prepare --trace``.

Three formats (``TRACE_FORMATS``), read by ``_trace_formats``:

- ``mooncake``: JSONL, one object a line: ``timestamp`` (ms since the first request, integer or
  float), ``input_length``, ``output_length``, optional ``hash_ids`` (ids of ``block_tokens``-token
  prompt blocks, 512 by default; equal ids, equal prefix block). Other keys are ignored.
- ``burstgpt``: CSV with ``Timestamp`` (s), ``Request tokens``, ``Response tokens`` (others such
  as ``Model`` or ``Log Type`` ignored). A row whose ``Response tokens`` is 0 is a failure in the
  source: dropped and counted (``Trace.dropped_failures``).
- ``azure``: the Azure LLM inference trace's CSV: ``TIMESTAMP`` (a datetime such as
  ``2023-11-16 18:15:46.6805900``, up to 9 fractional digits and an optional UTC offset, or a
  number of seconds), ``ContextTokens``, ``GeneratedTokens``.

Without a format, ``detect_format`` tells it from the first line (a JSON object, or a CSV header
with one format's columns). The whole file is read (without following a symlink) and checked,
whatever the window: every refusal is a one-line ``TraceError`` naming the file, and for a bad
row its line number and field (``trace FILE row 7: Request tokens: not an integer ('abc')``).

The window: times are taken relative to the trace's first request (after dropping failures);
the requests with ``start_s <= t < start_s + duration_s`` are kept (no end without a duration;
compared to the nanosecond), then the first ``limit`` of them, and their offsets are rebased so
the first kept request is at 0.0. A window with no request is refused.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal, get_args

from narwhal_trial._errors import TrialUsageError
from narwhal_trial._files import read_regular
from narwhal_trial.workload._trace_formats import (
    AZURE_COLUMNS,
    BURSTGPT_COLUMNS,
    RawRow,
    RowReader,
    TraceError,
    azure_rows,
    burstgpt_rows,
    mooncake_rows,
    shown,
)

__all__ = [
    "DEFAULT_BLOCK_TOKENS",
    "TRACE_FORMATS",
    "Trace",
    "TraceError",
    "TraceFormat",
    "TraceRequest",
    "clipped",
    "detect_format",
    "longest",
    "over_limit",
    "read_trace",
]

TraceFormat = Literal["mooncake", "burstgpt", "azure"]
TRACE_FORMATS: Final[tuple[TraceFormat, ...]] = get_args(TraceFormat)
DEFAULT_BLOCK_TOKENS: Final = 512
"""Tokens per ``hash_ids`` block: Mooncake's trace hashes its prompts in 512-token blocks."""

_READERS: dict[TraceFormat, RowReader] = {
    "mooncake": mooncake_rows,
    "burstgpt": burstgpt_rows,
    "azure": azure_rows,
}
_NS = 1_000_000_000
_FORMAT_HINT = "pass --trace-format (mooncake, burstgpt or azure)"


@dataclass(frozen=True, slots=True)
class TraceRequest:
    """One request of a trace: when it arrives in the window, and its lengths."""

    offset_s: float
    """Seconds after the window's first request (the first is 0.0)."""
    input_tokens: int
    output_tokens: int
    hash_ids: tuple[int, ...] | None = None
    """Mooncake's prompt block ids (``Trace.block_tokens`` tokens each), when the trace has them."""
    row: int = 0
    """The 1-based line number in the file (a CSV's header is line 1)."""

    def __post_init__(self) -> None:
        if self.input_tokens < 1 or self.output_tokens < 1:
            raise ValueError(
                f"lengths must be at least 1, got {self.input_tokens} in, {self.output_tokens} out"
            )


@dataclass(frozen=True, slots=True)
class Trace:
    """A trace's window of requests, and what was read and asked to get it."""

    path: str
    sha256: str
    """SHA-256 of the file's exact bytes."""
    format: TraceFormat
    requests: tuple[TraceRequest, ...]
    rows: int
    """Data rows read, before dropping failures and windowing."""
    dropped_failures: int
    """BurstGPT rows with ``Response tokens`` 0."""
    start_s: float
    """The window asked, seconds after the trace's first request."""
    duration_s: float | None
    limit: int | None
    block_tokens: int


def detect_format(path: Path, head: bytes) -> TraceFormat:
    """The format of a trace from its first line (``head``: the file's first bytes).

    A JSON object is Mooncake; a CSV header is BurstGPT or Azure by its columns. A TraceError,
    saying to pass ``--trace-format``, when the line is none of them or could be either."""
    line = head.split(b"\n", 1)[0].removeprefix(b"\xef\xbb\xbf").strip()
    if line.startswith(b"{"):
        return "mooncake"
    text = line.decode("utf-8", errors="replace")
    names = {name.strip() for name in text.split(",")}
    burstgpt = set(BURSTGPT_COLUMNS) <= names
    azure = set(AZURE_COLUMNS) <= names
    if burstgpt and azure:
        raise TraceError(
            f"trace {path}: its first line ({shown(text)}) has both BurstGPT's and Azure's "
            f"columns; {_FORMAT_HINT}"
        )
    if burstgpt:
        return "burstgpt"
    if azure:
        return "azure"
    raise TraceError(
        f"trace {path}: cannot tell its format from its first line ({shown(text)}): neither a "
        f"JSON object nor a BurstGPT or Azure CSV header; {_FORMAT_HINT}"
    )


def _read(path: Path) -> bytes:
    """The file's bytes: a regular file, its symlink not followed; a TraceError otherwise."""
    try:
        info = path.lstat()
        if stat.S_ISLNK(info.st_mode):
            raise TraceError(f"cannot read trace {path}: it is a symlink (not followed)")
        if not stat.S_ISREG(info.st_mode):
            raise TraceError(f"cannot read trace {path}: not a regular file")
        return read_regular(path)
    except OSError as exc:
        raise TraceError(f"cannot read trace {path}: {exc.strerror or exc}") from exc


def _check_window(
    start_s: float, duration_s: float | None, limit: int | None, block_tokens: int
) -> None:
    if not (math.isfinite(start_s) and start_s >= 0):
        raise TrialUsageError(f"trace window start must be a number >= 0 s, got {start_s}")
    if duration_s is not None and not (math.isfinite(duration_s) and duration_s > 0):
        raise TrialUsageError(f"trace window duration must be a number > 0 s, got {duration_s}")
    if limit is not None and limit < 1:
        raise TrialUsageError(f"trace request limit must be at least 1, got {limit}")
    if block_tokens < 1:
        raise TrialUsageError(f"trace block size must be at least 1 token, got {block_tokens}")


def _secs(seconds: float) -> str:
    """Seconds for a message: at most 3 decimals, no trailing zeros (``12.5``, ``3600``)."""
    return f"{seconds:.3f}".rstrip("0").rstrip(".")


def read_trace(
    path: Path,
    *,
    trace_format: TraceFormat | None = None,
    start_s: float = 0.0,
    duration_s: float | None = None,
    limit: int | None = None,
    block_tokens: int = DEFAULT_BLOCK_TOKENS,
) -> Trace:
    """Read, check and window a trace (see the module's docstring); TraceError when unusable."""
    _check_window(start_s, duration_s, limit, block_tokens)
    data = _read(path)
    label = str(path)
    if not data.strip():
        raise TraceError(f"trace {label} is empty")
    fmt = trace_format if trace_format is not None else detect_format(path, data[:65536])
    if fmt not in _READERS:
        raise TrialUsageError(f"unknown trace format {fmt!r}: {', '.join(TRACE_FORMATS)}")
    lo = round(start_s * _NS)
    hi = None if duration_s is None else lo + round(duration_s * _NS)
    rows = failures = 0
    first_ns = last_ns = 0
    kept: list[RawRow] = []
    for raw in _READERS[fmt](label, data, block_tokens):
        rows += 1
        if raw[3] == 0:
            failures += 1
            continue
        if rows - failures == 1:
            first_ns = raw[1]
        last_ns = raw[1]
        t = raw[1] - first_ns
        if lo <= t and (hi is None or t < hi) and (limit is None or len(kept) < limit):
            kept.append(raw)
    if rows == 0:
        raise TraceError(f"trace {label} has no data row")
    if rows == failures:
        raise TraceError(
            f"trace {label}: all {rows} rows are failures (Response tokens 0): no request left"
        )
    if not kept:
        span = f"{rows} rows over {_secs((last_ns - first_ns) / _NS)} s"
        if hi is None:
            raise TraceError(f"no request at or after {_secs(start_s)} s of {label} ({span})")
        raise TraceError(
            f"no request between {_secs(start_s)} s and {_secs(hi / _NS)} s of {label} ({span})"
        )
    t0 = kept[0][1]
    requests = tuple(
        TraceRequest(
            offset_s=(ns - t0) / _NS,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            hash_ids=ids,
            row=row,
        )
        for row, ns, input_tokens, output_tokens, ids in kept
    )
    return Trace(
        path=label,
        sha256=hashlib.sha256(data).hexdigest(),
        format=fmt,
        requests=requests,
        rows=rows,
        dropped_failures=failures,
        start_s=start_s,
        duration_s=duration_s,
        limit=limit,
        block_tokens=block_tokens,
    )


def longest(trace: Trace) -> TraceRequest:
    """The request with the most tokens (input + output; the first of equals): the worst row a
    refusal names."""
    if not trace.requests:
        raise ValueError(f"trace {trace.path} has no request")
    return max(trace.requests, key=lambda r: r.input_tokens + r.output_tokens)


def over_limit(trace: Trace, max_model_len: int) -> list[TraceRequest]:
    """The requests that do not fit the context: input + output > ``max_model_len``."""
    return [r for r in trace.requests if r.input_tokens + r.output_tokens > max_model_len]


def clipped(trace: Trace, max_model_len: int) -> Trace:
    """The trace with every request that does not fit ``max_model_len`` clipped to fit it.

    The rule, for a request with input + output > ``max_model_len``:

    - the output is kept and the input reduced to ``max_model_len - output`` when that leaves at
      least 1 input token (the trace's decode load is what a trial usually asks about);
    - otherwise (the output alone does not fit) the output becomes ``max_model_len - 1`` and the
      input 1.

    A clipped request's ``hash_ids`` keep only the blocks its shorter input still fills (the
    first ``ceil(input / block_tokens)``). Requests that fit, and everything else, are kept.
    """
    if max_model_len < 2:
        raise TrialUsageError(f"max_model_len must be at least 2 to clip to, got {max_model_len}")
    out: list[TraceRequest] = []
    for r in trace.requests:
        if r.input_tokens + r.output_tokens <= max_model_len:
            out.append(r)
            continue
        if r.output_tokens < max_model_len:
            input_tokens, output_tokens = max_model_len - r.output_tokens, r.output_tokens
        else:
            input_tokens, output_tokens = 1, max_model_len - 1
        ids = r.hash_ids
        if ids is not None:
            ids = ids[: -(-input_tokens // trace.block_tokens)]
        out.append(
            dataclasses.replace(
                r, input_tokens=input_tokens, output_tokens=output_tokens, hash_ids=ids
            )
        )
    return dataclasses.replace(trace, requests=tuple(out))
