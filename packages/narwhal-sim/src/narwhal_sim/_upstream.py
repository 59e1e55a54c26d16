"""A minimal HTTP/1.1 client, one connection per request: the router's forwarding to an engine
and an engine's span export."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass


class UpstreamError(Exception):
    """The engine could not be reached or broke the HTTP framing."""


@dataclass(slots=True)
class UpstreamResponse:
    """Status, headers and a body reader of an engine's response."""

    status: int
    headers: dict[str, str]
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter

    async def body_parts(self) -> AsyncIterator[bytes]:
        """The body as it arrives (de-chunked); raises UpstreamError when it ends early."""
        try:
            if "chunked" in self.headers.get("transfer-encoding", "").lower():
                while True:
                    size_line = await self.reader.readuntil(b"\r\n")
                    size = int(size_line.split(b";")[0].strip(), 16)
                    if size == 0:
                        await self.reader.readuntil(b"\r\n")
                        return
                    data = await self.reader.readexactly(size + 2)
                    yield data[:-2]
            elif "content-length" in self.headers:
                length = int(self.headers["content-length"])
                if length:
                    yield await self.reader.readexactly(length)
            else:
                while chunk := await self.reader.read(65536):
                    yield chunk
        except (
            asyncio.IncompleteReadError,
            asyncio.LimitOverrunError,
            ConnectionError,
            ValueError,
        ) as exc:
            raise UpstreamError(f"engine response ended early: {exc!r}") from exc

    def close(self) -> None:
        """Drop the connection."""
        self.writer.close()


async def send(
    host: str, port: int, method: str, path: str, headers: list[tuple[str, str]], body: bytes
) -> UpstreamResponse:
    """Send one request (``connection: close``) and read the response head."""
    try:
        reader, writer = await asyncio.open_connection(host, port, limit=1 << 20)
    except OSError as exc:
        raise UpstreamError(f"cannot connect to {host}:{port}: {exc.strerror or exc}") from exc
    lines = [
        f"{method} {path} HTTP/1.1",
        f"host: {host}:{port}",
        "connection: close",
        f"content-length: {len(body)}",
    ]
    lines += [f"{k}: {v}" for k, v in headers]
    try:
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError) as exc:
        writer.close()
        raise UpstreamError(f"engine {host}:{port} closed the connection: {exc!r}") from exc
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    try:
        status = int(status_line.split(" ")[1])
    except (IndexError, ValueError) as exc:
        writer.close()
        raise UpstreamError(f"bad status line from {host}:{port}: {status_line!r}") from exc
    hdrs: dict[str, str] = {}
    for line in header_lines:
        if line:
            name, _, value = line.partition(":")
            hdrs[name.strip().lower()] = value.strip()
    return UpstreamResponse(status, hdrs, reader, writer)
