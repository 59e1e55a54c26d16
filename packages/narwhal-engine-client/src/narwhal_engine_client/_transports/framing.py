"""HTTP/1.1 response framing for the raw stream transport: the head, and the body's boundaries.

``parse_head`` reads a response head (skipping 1xx answers) into a ``Head``; a ``BodyReader``
then strips the body's framing (``Transfer-Encoding: chunked``, ``Content-Length``, or
read-until-close) from each network read with a few slices and ``find`` calls, and says when the
body ended and whether the connection can carry another request.
"""

from __future__ import annotations

from dataclasses import dataclass

HEAD_LIMIT = 65536
_SIZE_LINE_LIMIT = 1024
_HEX = b"0123456789abcdefABCDEF"

CHUNKED, LENGTH, CLOSE = 0, 1, 2  # body framings
_SIZE, _DATA, _CRLF, _TRAILER = 0, 1, 2, 3  # chunked states


class FramingError(Exception):
    """The response violated HTTP/1.1 framing (bad status line, header, chunk size or CRLF)."""


@dataclass(slots=True)
class Head:
    """A parsed response head: what the body reader and the error message need."""

    status: int
    reason: str
    framing: int
    length: int  # Content-Length (LENGTH framing), else 0
    keep_alive: bool


def parse_head(buf: bytes) -> tuple[Head, bytes] | None:
    """The final head in ``buf`` and the bytes after it; None while it is incomplete."""
    while True:
        end = buf.find(b"\r\n\r\n")
        if end < 0:
            if len(buf) > HEAD_LIMIT:
                raise FramingError("response head too large")
            return None
        lines = buf[:end].split(b"\r\n")
        buf = buf[end + 4 :]
        parts = lines[0].split(b" ", 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
            raise FramingError(f"bad status line {lines[0][:100]!r}")
        status = int(parts[1])
        if not 100 <= status < 200:  # an informational answer: the real head follows
            break
    keep_alive = parts[0] == b"HTTP/1.1"
    coding: bytes | None = None
    length: bytes | None = None
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        if name == b"transfer-encoding":
            coding = value.strip().lower()
        elif name == b"content-length":
            length = value.strip()
        elif name == b"connection":
            tokens = value.lower()
            if b"close" in tokens:
                keep_alive = False
            elif b"keep-alive" in tokens:
                keep_alive = True
    framing, size = CLOSE, 0
    if coding is not None:
        if coding != b"chunked":
            raise FramingError(f"unsupported transfer-encoding {coding[:50]!r}")
        framing = CHUNKED
    elif length is not None:
        if not length.isdigit():
            raise FramingError(f"bad content-length {length[:50]!r}")
        framing, size = LENGTH, int(length)
    elif status in (204, 304):
        framing = LENGTH
    else:
        keep_alive = False  # the body runs until the server closes
    reason = parts[2].decode("latin-1") if len(parts) == 3 else ""
    return Head(status, reason, framing, size, keep_alive), buf


class BodyReader:
    """Strips the framing of one response body, read by read.

    ``feed(data)`` returns the body bytes in ``data``; afterwards ``done`` tells whether the body
    ended, ``reusable`` whether nothing but the body came (so the connection can be reused), and
    ``bad`` holds the FramingError that stopped it (the bytes before it are still returned).
    """

    __slots__ = ("_buf", "_framing", "_left", "_state", "bad", "done", "reusable")

    def __init__(self, head: Head) -> None:
        self._framing = head.framing
        self._left = head.length
        self._state = _SIZE
        self._buf = b""
        self.done = head.framing == LENGTH and head.length == 0
        self.reusable = head.keep_alive
        self.bad: FramingError | None = None

    def feed(self, data: bytes) -> bytes:
        """The body bytes of one read."""
        framing = self._framing
        if framing == CHUNKED:
            return self._chunked(data)
        if framing == CLOSE:
            return data
        left = self._left
        if len(data) >= left:
            self.done = True
            if len(data) > left:
                self.reusable = False  # bytes beyond the body: do not trust the connection
                data = data[:left]
        self._left = left - len(data)
        return data

    def _chunked(self, data: bytes) -> bytes:
        if self._buf:
            data = self._buf + data
            self._buf = b""
        out: list[bytes] = []
        n = len(data)
        try:
            pos = self._frames(data, out)
        except FramingError as exc:  # the chunks before the bad line still count
            self.bad = exc
            pos = n
        if pos < n and not self.done:
            self._buf = data[pos:]
        if not out:
            return b""
        return out[0] if len(out) == 1 else b"".join(out)

    def _frames(self, data: bytes, out: list[bytes]) -> int:
        pos, n, left, state = 0, len(data), self._left, self._state
        while pos < n:
            if state == _DATA:
                end = pos + left
                if end >= n:  # the chunk goes on past this read (or ends exactly with it)
                    out.append(data[pos:] if pos else data)
                    left = end - n
                    pos = n
                    if left == 0:
                        state = _CRLF
                    break
                out.append(data[pos:end])
                pos, left, state = end, 0, _CRLF
            elif state == _CRLF:
                if n - pos < 2:
                    break
                if data[pos : pos + 2] != b"\r\n":
                    raise FramingError("chunk data not followed by CRLF")
                pos += 2
                state = _SIZE
            else:
                nl = data.find(b"\r\n", pos)
                if nl < 0:
                    if n - pos > _SIZE_LINE_LIMIT:
                        raise FramingError("chunk size line too long")
                    break
                if state == _SIZE:
                    size = data[pos:nl].split(b";", 1)[0].strip()
                    if not size or size.strip(_HEX):
                        raise FramingError(f"bad chunk size {size[:50]!r}")
                    left = int(size, 16)
                    state = _DATA if left else _TRAILER
                elif nl == pos:  # the empty line after the last chunk and its trailers
                    pos += 2
                    self.done = True
                    if pos < n:
                        self.reusable = False
                    break
                pos = nl + 2
        self._left, self._state = left, state
        return pos
