"""Simulator overhead: N concurrent streams at a fixed step time; observed ITL vs model; CPU/token.

Starts ``narwhal-sim`` (preset ``flat-5ms``: every decode step is 5 ms whatever the batch) as a
subprocess, opens N streams with a lean raw-socket client (so the client costs little), and reports:
the mean inter-token interval each stream saw against the model's 5 ms, the spread of intervals,
and the simulator process's CPU time per token (from /proc, user + system).

    .venv/bin/python bench/sim_bench.py --streams 64 --tokens 400
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import statistics
import tempfile
import time
from pathlib import Path

import orjson

from narwhal_sim import get_preset, tpot_s
from narwhal_sim.testing import start_sim_fleet


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _stream(host: str, port: int, body: bytes, rid: str) -> list[float]:
    reader, writer = await asyncio.open_connection(host, port)
    head = (
        f"POST /v1/completions HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/json\r\n"
        f"x-request-id: {rid}\r\ncontent-length: {len(body)}\r\nconnection: close\r\n\r\n"
    ).encode()
    writer.write(head + body)
    times: list[float] = []
    buf = b""
    while True:
        data = await reader.read(65536)
        if not data:
            break
        now = time.perf_counter()
        buf += data
        # count the content events completed by this read ('"choices":[{' once per event; the
        # usage chunk has []); a partial event stays in buf and is counted when its end arrives
        end = buf.rfind(b"\n\n")
        if end >= 0:
            times.extend([now] * buf.count(b'"choices":[{', 0, end))
            buf = buf[end + 2 :]
        if b"data: [DONE]" in data:
            break
    writer.close()
    return times


async def _run(url: str, streams: int, tokens: int) -> list[list[float]]:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    bodies = [
        orjson.dumps(
            {
                "model": "m",
                "prompt": [300 + k] * 128,
                "max_tokens": tokens,
                "min_tokens": tokens,
                "ignore_eos": True,
                "stream": True,
            }
        )
        for k in range(streams)
    ]
    return await asyncio.gather(
        *[_stream(host, int(port), b, f"bench-{k}") for k, b in enumerate(bodies)]
    )


def main() -> None:
    """Run the benchmark and print the figures."""
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--streams", type=int, default=64)
    ap.add_argument("--tokens", type=int, default=400, help="output tokens per stream")
    ap.add_argument("--preset", default="flat-5ms")
    ap.add_argument("--via-router", action="store_true", help="send the streams through the router")
    args = ap.parse_args()
    preset = get_preset(args.preset)
    with tempfile.TemporaryDirectory(prefix="sim-bench-") as tmp:
        cfg = {
            "format": "narwhal.sim",
            "format_version": 1,
            "defaults": {"preset": args.preset},
            "engines": {},
        }
        with start_sim_fleet(
            Path(tmp),
            [{"iid": "bench", "role": "mixed", "model": "m"}],
            sim_config=cfg,
            router=args.via_router,
        ) as fleet:
            pid = fleet.process.pid
            cpu0, wall0 = _cpu_seconds(pid), time.perf_counter()
            target = (
                fleet.router_url if args.via_router and fleet.router_url else fleet.urls["bench"]
            )
            results = asyncio.run(_run(target, args.streams, args.tokens))
            cpu, wall = _cpu_seconds(pid) - cpu0, time.perf_counter() - wall0
    counts = [len(t) for t in results]
    start = max(t[0] for t in results)
    end = min(t[-1] for t in results)
    per_stream: list[float] = []
    gaps: list[float] = []
    for t in results:
        inside = [x for x in t if start <= x <= end]
        per_stream.append((inside[-1] - inside[0]) / (len(inside) - 1))
        gaps.extend(b - a for a, b in itertools.pairwise(inside))
    model = tpot_s(preset, args.streams, 128 + args.tokens / 2)
    mean_itl = statistics.median(per_stream)
    gaps.sort()
    tokens = sum(counts)
    via = " via the router" if args.via_router else ""
    print(
        f"narwhal-sim bench: {args.streams} streams x {args.tokens} tokens, "
        f"preset {args.preset}{via}"
    )
    print(f"  tokens received          {tokens} (expected {args.streams * args.tokens})")
    print(f"  model TPOT               {model * 1e3:.3f} ms")
    print(f"  observed TPOT (median)   {mean_itl * 1e3:.3f} ms ({mean_itl / model - 1:+.2%})")
    print(
        f"  chunk gap p50 / p99      {gaps[len(gaps) // 2] * 1e3:.3f} / "
        f"{gaps[int(len(gaps) * 0.99)] * 1e3:.3f} ms"
    )
    print(
        f"  simulator CPU            {cpu:.2f} s over {wall:.2f} s wall "
        f"({cpu / wall:.0%} of one core)"
    )
    print(f"  simulator CPU per token  {cpu / tokens * 1e6:.1f} us")


if __name__ == "__main__":
    main()
