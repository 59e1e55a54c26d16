"""The stream transports: what carries ``EngineClient.stream_completion``.

- ``httpx``: the default, ``httpx.AsyncClient.send(stream=True)`` (``run_stream``).
- ``raw``: the opt-in minimal HTTP/1.1 client for ``http://`` engines: ``raw`` (the keep-alive
  pool, ``RawStreamPool``), ``http1`` (one connection, an ``asyncio.Protocol``) and ``framing``
  (the response head and the body's framing).

Both feed the SSE consumer (``_sse``) and settle a ``StreamRecord`` (``_record``) the same way.
"""
