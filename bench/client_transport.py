"""Client CPU of the two stream transports of narwhal-engine-client (not part of ``make test``).

Method. ``bench/trial_stamping_server.py`` runs in a subprocess on loopback and answers every
``POST /v1/completions`` with ``max_tokens`` one-token SSE chunks (chunked transfer encoding, the
first after ``--ttft`` seconds, then one every ``--tpot`` seconds), a usage chunk and ``[DONE]``.
This process streams completions from it with ``EngineClient.stream_completion``, closed loop, with
``--concurrency`` workers each sending its next request as soon as its last one ended, once per
transport (``httpx``, the default, and ``raw``). After an unmeasured warm-up of one request per
worker, the client's own CPU (``resource.getrusage(RUSAGE_SELF)``, user + system) is read around
the measured requests; the server's CPU is its own process and is not counted. Reported per
scenario and transport: CPU per request (ms) and per content chunk (µs), achieved requests per
second, connections opened during the measured requests, and whether every record was ok with the
expected token count.

Scenarios (``--quick`` divides the request counts by 4): 2000 requests x 16 tokens and 500 requests
x 128 tokens, concurrency 64. ``--with-httpx-reuse`` adds a third variant on a quarter of the
requests: the httpx path reading on after ``[DONE]`` to the end of each body, so that httpcore keeps
its connections alive (the library path closes each response at ``[DONE]``, which costs a new
connection per request when the server writes the chunked terminator separately).

Run: ``.venv/bin/python bench/client_transport.py [--quick] [--with-httpx-reuse] [--json FILE]
[--client-cpu N --server-cpu M]`` (about 25 s, 40 s with ``--with-httpx-reuse``; the pins use
``os.sched_setaffinity`` where it exists).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import resource
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from narwhal_engine_client import EngineClient, StreamRecord, StreamTransport, completion_body
from narwhal_engine_client._record import finish
from narwhal_engine_client._sse import Consumer

SERVER = Path(__file__).resolve().parent / "trial_stamping_server.py"
SCENARIOS = ((2000, 16), (500, 128))
TRANSPORTS = ("httpx", "raw")
PROMPT = list(range(1000, 1512))  # 512 prompt tokens: a ~3 KB request body


@dataclass(slots=True)
class Row:
    """One scenario measured on one transport."""

    transport: str
    requests: int
    tokens: int
    concurrency: int
    wall_s: float
    cpu_s: float
    chunks: int
    ok: int
    cpu_ms_per_request: float
    cpu_us_per_chunk: float
    achieved_rps: float
    connections: int


async def _httpx_reuse(client: EngineClient, body: bytes, request_id: str) -> StreamRecord:
    """The httpx path, but reading on after ``[DONE]`` to the end of the body, so that httpcore
    can reuse the connection (the library path closes the response at ``[DONE]``)."""
    http = client._http  # a bench-only variant: the client's own httpx.AsyncClient
    clock = time.perf_counter_ns
    record = StreamRecord(request_id=request_id, send_ns=clock(), bytes_sent=len(body))
    consumer = Consumer(record, False)
    headers = {"Content-Type": "application/json", "X-Request-Id": request_id}
    request = http.build_request("POST", "/v1/completions", content=body, headers=headers)
    response = await http.send(request, stream=True)
    try:
        record.http_status = response.status_code
        done = False
        async for data in response.aiter_bytes():
            if not done:
                done = consumer.push(data, clock())
        finish(record, consumer.close(clock), clock)
    finally:
        await response.aclose()
    return record


async def _closed_loop(
    client: EngineClient, bodies: list[bytes], prefix: str, concurrency: int, reuse: bool = False
) -> list[StreamRecord]:
    queue = iter(enumerate(bodies))
    records: list[StreamRecord] = []

    async def worker() -> None:
        for n, body in queue:
            rid = f"{prefix}-{n}"
            if reuse:
                records.append(await _httpx_reuse(client, body, rid))
            else:
                records.append(await client.stream_completion(body, request_id=rid))

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return records


async def _measure(url: str, name: str, requests: int, tokens: int, concurrency: int) -> Row:
    body = completion_body(model="stamp", prompt=PROMPT, max_tokens=tokens)
    reuse = name == "httpx-reuse"
    loop = asyncio.get_running_loop()
    connect = loop.create_connection
    opened = 0

    def counting(*args: Any, **kwargs: Any) -> Any:  # anyio (httpx) and raw both connect here
        nonlocal opened
        opened += 1
        return connect(*args, **kwargs)

    setattr(loop, "create_connection", counting)  # noqa: B010 - mypy refuses assigning a method
    transport: StreamTransport = "raw" if name == "raw" else "httpx"
    async with EngineClient(
        url, timeout_s=60.0, max_connections=concurrency + 16, stream_transport=transport
    ) as client:
        warm = await _closed_loop(client, [body] * concurrency, f"w-{name}", concurrency, reuse)
        if not all(r.ok for r in warm):
            bad = next(r for r in warm if not r.ok)
            raise SystemExit(f"warm-up failed on {name}: {bad.error}")
        before = resource.getrusage(resource.RUSAGE_SELF)
        opened = 0
        start = time.perf_counter()
        records = await _closed_loop(
            client, [body] * requests, f"m-{name}-{tokens}", concurrency, reuse
        )
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    chunks = sum(len(r.chunk_ns) for r in records)
    ok = sum(1 for r in records if r.ok and r.completion_tokens == tokens)
    return Row(
        transport=name,
        requests=requests,
        tokens=tokens,
        concurrency=concurrency,
        wall_s=round(wall, 3),
        cpu_s=round(cpu, 3),
        chunks=chunks,
        ok=ok,
        cpu_ms_per_request=round(cpu / requests * 1e3, 3),
        cpu_us_per_chunk=round(cpu / max(chunks, 1) * 1e6, 1),
        achieved_rps=round(requests / wall, 1),
        connections=opened,
    )


def _start_server(ttft: float, tpot: float, cpu: int | None) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, str(SERVER), "--ttft", str(ttft), "--tpot", str(tpot)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    port = proc.stdout.readline().strip()
    if not port.isdigit():
        proc.kill()
        raise SystemExit("the stamping server did not start")
    if cpu is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(proc.pid, {cpu})
    return proc, f"http://127.0.0.1:{port}"


def _table(rows: list[Row]) -> str:
    lines = [
        "| transport | requests x tokens | CPU/request | CPU/chunk | achieved req/s | wall "
        "| connections opened | ok |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        lines.append(
            f"| {r.transport} | {r.requests} x {r.tokens} | {r.cpu_ms_per_request:.2f} ms "
            f"| {r.cpu_us_per_chunk:.1f} µs | {r.achieved_rps:.0f} | {r.wall_s:.1f} s "
            f"| {r.connections} | {r.ok}/{r.requests} |"
        )
    return "\n".join(lines)


def main() -> None:
    """Command line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="a quarter of the requests")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--ttft", type=float, default=0.02, help="server seconds to first chunk")
    parser.add_argument("--tpot", type=float, default=0.005, help="server seconds per chunk")
    parser.add_argument("--client-cpu", type=int, default=None, help="pin this process")
    parser.add_argument("--server-cpu", type=int, default=None, help="pin the server")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows here")
    parser.add_argument(
        "--with-httpx-reuse",
        action="store_true",
        help="also measure httpx reading on to the end of each body (a quarter of the requests)",
    )
    args = parser.parse_args()
    if args.client_cpu is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {args.client_cpu})
    proc, url = _start_server(args.ttft, args.tpot, args.server_cpu)
    load_before = os.getloadavg()
    rows: list[Row] = []
    try:
        for requests, tokens in SCENARIOS:
            n = max(args.concurrency, requests // 4) if args.quick else requests
            for name in TRANSPORTS:
                rows.append(asyncio.run(_measure(url, name, n, tokens, args.concurrency)))
            if args.with_httpx_reuse:
                quarter = max(args.concurrency, n // 4)
                rows.append(
                    asyncio.run(_measure(url, "httpx-reuse", quarter, tokens, args.concurrency))
                )
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    load_after = os.getloadavg()
    print(
        f"python {platform.python_version()}, {os.cpu_count()} CPUs, loadavg "
        f"{load_before[0]:.2f} before / {load_after[0]:.2f} after, server ttft {args.ttft:g} s "
        f"tpot {args.tpot:g} s, concurrency {args.concurrency}"
    )
    print(_table(rows))
    if args.json is not None:
        doc = {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "loadavg_before": load_before,
            "loadavg_after": load_after,
            "ttft_s": args.ttft,
            "tpot_s": args.tpot,
            "rows": [asdict(r) for r in rows],
        }
        args.json.write_text(json.dumps(doc, indent=2) + "\n")


if __name__ == "__main__":
    main()
