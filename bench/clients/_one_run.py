"""One client on one row: a fresh counterpart, the client to its end, and the row's figures."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ._measures import ClientReport, RowResult, evaluate, load_stamps
from ._proc import Counterpart, Finished
from ._rows import Row

Runner = Callable[[Row, str, Path], tuple[Finished, ClientReport, list[str]]]
"""``runner(row, server_url, folder)``: run one client against the server; its exit, report and
command line."""


def run_one(client: str, runner: Runner, row: Row, folder: Path) -> tuple[RowResult, list[str]]:
    """Start a stamping counterpart in ``folder``, run ``runner`` against it, stop it, evaluate."""
    folder.mkdir(parents=True, exist_ok=True)
    server = Counterpart(folder, ttft_ms=row.ttft_ms, token_ms=row.token_ms)
    try:
        done, report, argv = runner(row, server.url, folder)
    finally:
        stamps_path = server.stop()
    result = evaluate(
        client=client,
        row_name=row.name,
        rate=row.rate,
        requests=row.requests,
        output_tokens=row.output_tokens,
        stamps=load_stamps(stamps_path),
        report=report,
        cpu_s=done.cpu_s,
        exit_code=done.exit_code,
        wall_s=done.wall_s,
        server_cpu_s=server.cpu_s,
    )
    return result, argv
