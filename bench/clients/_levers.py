"""``--stream-cost``: client CPU per streamed chunk of httpx, aiohttp and a bare protocol client."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ._proc import BenchError, Counterpart, run_measured
from ._venvs import Venv

SCRIPT = Path(__file__).resolve().parent / "stream_cost.py"
VARIANTS = (
    ("httpx", "asyncio"),
    ("httpx", "uvloop"),
    ("aiohttp", "asyncio"),
    ("aiohttp", "uvloop"),
    ("raw", "asyncio"),
    ("raw", "uvloop"),
)


def stream_cost(venv: Venv, folder: Path, *, requests: int = 200, tokens: int = 128) -> str:
    """Run every variant against one counterpart (client pinned) and return a Markdown table."""
    folder.mkdir(parents=True, exist_ok=True)
    server = Counterpart(folder, ttft_ms=10.0, token_ms=5.0)
    rows: list[dict[str, Any]] = []
    try:
        for impl, loop in VARIANTS:
            log = folder / f"{impl}-{loop}.log"
            done = run_measured(
                [
                    str(venv.python),
                    str(SCRIPT),
                    "--url",
                    server.url,
                    "--impl",
                    impl,
                    "--loop",
                    loop,
                    "--requests",
                    str(requests),
                    "--tokens",
                    str(tokens),
                ],
                cwd=folder,
                log=log,
                timeout_s=300,
            )
            if done.exit_code != 0:
                raise BenchError(f"stream_cost {impl}/{loop} exited {done.exit_code}; see {log}")
            rows.append(json.loads(log.read_text().strip().splitlines()[-1]))
    finally:
        server.stop()
    lines = [
        f"| {r['impl']} | {r['loop']} | {r['cpu_per_chunk_us']:.1f} | "
        f"{r['cpu_per_request_ms']:.2f} | {r['wall_s']:.1f} |"
        for r in rows
    ]
    return (
        f"Streaming cost, {requests} requests x {tokens} one-token chunks, 32 concurrent, "
        "closed loop, client pinned (CPU of the streaming phase only):\n\n"
        "| HTTP stack | event loop | CPU per chunk (us) | CPU per request (ms) | wall (s) |\n"
        "| --- | --- | ---: | ---: | ---: |\n" + "\n".join(lines) + "\n"
    )
