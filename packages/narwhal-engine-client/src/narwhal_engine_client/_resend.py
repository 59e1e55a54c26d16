"""The one retry the engine client makes: a request the server closed its connection on, unanswered.

Servers close idle keep-alive connections (vLLM after 5 s, nginx after 75 s, load balancers when
they like). A request written onto a reused connection just as the server closes it gets no
answer at all: the connection ends before a single response byte. Such a request was never
processed, so it is sent once more on a new connection. Nothing else is ever retried.
"""

from __future__ import annotations

from collections.abc import Callable

import httpx


def unanswered(exc: httpx.TransportError) -> bool:
    """A failure that leaves no response byte read: the server closed (EOF, reset, broken pipe)
    before answering. A malformed response head is a ``RemoteProtocolError`` too, but says so."""
    if isinstance(exc, httpx.RemoteProtocolError):
        return "without sending a response" in str(exc)
    return isinstance(exc, httpx.ReadError | httpx.WriteError)


def copy_request(request: httpx.Request) -> httpx.Request:
    """The same request again, with extensions of its own (no trace hook of the first send)."""
    return httpx.Request(
        request.method, request.url, headers=request.headers, content=request.content
    )


async def send_with_resend(
    http: httpx.AsyncClient, request: httpx.Request, fresh: Callable[[], httpx.AsyncClient]
) -> httpx.Response:
    """``http.send(request)`` with its body read; sent once more through ``fresh()`` (a client
    that opens a new connection) when it went on a reused connection that closed unanswered."""
    connected = False

    async def trace(name: str, info: object) -> None:
        nonlocal connected
        if name == "connection.connect_tcp.started":
            connected = True

    request.extensions["trace"] = trace
    try:
        return await http.send(request)
    except httpx.TransportError as exc:
        if connected or not unanswered(exc):
            raise
    return await fresh().send(copy_request(request))
