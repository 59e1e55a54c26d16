"""``bench/bench_clients.py``: narwhal-trial, AIPerf and guidellm side by side.

For every row and client: start a fresh stamping counterpart (pinned to core 0), run the client
(pinned to core 1) to its end, stop the server, and compare what the client reported with what
the server stamped. Prints the Markdown table and writes ``results.json``, ``table.md`` and every
log into ``--out`` (default ``runs/bench-clients/<UTC time>/``, git-ignored).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from . import _limit as _limit_study
from . import _narwhal, _peers, _venvs
from ._levers import stream_cost
from ._measures import RowResult
from ._one_run import Runner, run_one
from ._proc import BenchError, pinning_note, run_measured
from ._report import detail, machine, table
from ._rows import ROWS, select_rows

REPO = Path(__file__).resolve().parents[2]
CLIENTS = ("narwhal", "narwhal-httpx", "aiperf", "guidellm")
"""``narwhal`` is the trial as operators run it (``--transport auto``: raw over http://);
``narwhal-httpx`` forces the httpx transport."""


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="bench_clients.py",
        description="Side-by-side client benchmark: narwhal-trial vs AIPerf vs guidellm.",
    )
    parser.add_argument(
        "--rows",
        default=",".join(r.name for r in ROWS),
        help="comma-separated rows: " + ", ".join(f"{r.name} ({r.label})" for r in ROWS),
    )
    parser.add_argument("--clients", default=",".join(CLIENTS), help="comma-separated clients")
    parser.add_argument(
        "--quick", action="store_true", help="smoke test: same rates, 100-300 requests a row"
    )
    parser.add_argument("--out", type=Path, default=None, help="folder for results and logs")
    parser.add_argument(
        "--venvs", type=Path, default=REPO / ".bench-venvs", help="throwaway venvs (git-ignored)"
    )
    parser.add_argument(
        "--stream-cost",
        action="store_true",
        help="instead of the table: CPU per streamed chunk of httpx, aiohttp and a bare "
        "asyncio protocol, asyncio and uvloop (in the AIPerf venv, which has them all)",
    )
    limit = parser.add_argument_group(
        "limit study", "--limit: instead of the table, find the highest rate narwhal keeps valid"
    )
    limit.add_argument("--limit", action="store_true", help="run the limit study")
    limit.add_argument("--limit-start", type=float, default=500.0, help="first rate (req/s)")
    limit.add_argument("--limit-step", type=float, default=250.0, help="climb step (req/s)")
    limit.add_argument("--limit-seconds", type=float, default=6.0, help="seconds of offers a probe")
    limit.add_argument("--limit-refine", type=int, default=3, help="bisections after the climb")
    limit.add_argument(
        "--limit-max-in-flight", type=int, default=1024, help="the trial's --max-in-flight"
    )
    return parser.parse_args(argv)


def _limit(args: argparse.Namespace, out: Path) -> int:
    host = machine()
    print(f"[machine] nproc {host['nproc']}, {host['cpu_model']}; {pinning_note()}", flush=True)
    try:
        probes, good, bad = _limit_study.study(
            out,
            start=args.limit_start,
            step=args.limit_step,
            seconds=args.limit_seconds,
            refine=args.limit_refine,
            max_in_flight=args.limit_max_in_flight,
        )
    except BenchError as exc:
        print(f"bench_clients: {exc}", file=sys.stderr)
        return 1
    text = _limit_study.report(probes, good, bad, args.limit_max_in_flight)
    text = f"Machine: nproc {host['nproc']}, {host['cpu_model']}; {pinning_note()}.\n\n{text}"
    (out / "limit.md").write_text(text)
    doc = {
        "format": "narwhal.bench.limit",
        "format_version": 1,
        "machine": host,
        "highest_valid_rate": good,
        "lowest_invalid_rate": bad,
        "probes": [dataclasses.asdict(p) for p in probes],
    }
    (out / "limit.json").write_text(json.dumps(doc, indent=2) + "\n")
    print()
    print(text)
    print(f"results and logs in {out}")
    return 0 if probes else 1


def _stream_cost(args: argparse.Namespace, out: Path) -> int:
    try:
        venv = _venvs.ensure(_venvs.PEERS["aiperf"], args.venvs.resolve(), log=out / "install.log")
        text = stream_cost(venv, out, requests=50 if args.quick else 200)
    except (RuntimeError, BenchError) as exc:
        print(f"bench_clients: {exc}", file=sys.stderr)
        return 1
    (out / "stream-cost.md").write_text(text)
    print(text)
    return 0


def _tokenizer(venvs: dict[str, _venvs.Venv], root: Path, out: Path) -> Path:
    """Build the local tokenizer once (with any peer venv's ``tokenizers``)."""
    folder = root / "tokenizer"
    if (folder / "tokenizer.json").is_file() and (folder / "tokenizer_config.json").is_file():
        return folder
    venv = next(iter(venvs.values()))
    script = Path(__file__).resolve().parent / "build_tokenizer.py"
    done = run_measured(
        [str(venv.python), str(script), str(folder)],
        cwd=REPO,
        log=out / "tokenizer.log",
        timeout_s=300,
        core=None,
    )
    if done.exit_code != 0:
        raise BenchError(f"building the tokenizer failed; see {out / 'tokenizer.log'}")
    return folder


def _runners(
    clients: list[str], root: Path, out: Path, skipped: dict[str, str]
) -> dict[str, Runner]:
    runners: dict[str, Runner] = {}
    peers: dict[str, _venvs.Venv] = {}
    for name in clients:
        if name in ("narwhal", "narwhal-httpx"):
            why = _narwhal.available()
            if why is None:
                transport = "httpx" if name == "narwhal-httpx" else "auto"
                runners[name] = functools.partial(_narwhal.run, transport=transport)
            else:
                skipped[name] = why
            continue
        print(f"[setup] {name}: throwaway venv under {root / name} ...", flush=True)
        try:
            peers[name] = _venvs.ensure(_venvs.PEERS[name], root, log=out / f"install-{name}.log")
        except RuntimeError as exc:
            skipped[name] = f"install failed: {exc}"
            print(f"[setup] {name} skipped: {exc}", flush=True)
    if peers:
        try:
            tok = _tokenizer(peers, root, out)
        except BenchError as exc:
            for name in peers:
                skipped[name] = str(exc)
            peers = {}
        for name, venv in peers.items():
            fn = _peers.run_aiperf if name == "aiperf" else _peers.run_guidellm
            runners[name] = functools.partial(fn, venv, tok)
    return {name: runners[name] for name in clients if name in runners}


def main(argv: list[str] | None = None) -> int:
    """Run the chosen rows and clients; print the table. Exit 0, or 1 when nothing ran."""
    args = _parse(argv)
    try:
        rows = select_rows([r for r in args.rows.split(",") if r], quick=args.quick)
    except ValueError as exc:
        print(f"bench_clients: {exc}", file=sys.stderr)
        return 2
    clients = [c for c in args.clients.split(",") if c]
    unknown = [c for c in clients if c not in CLIENTS]
    if unknown:
        print(f"bench_clients: unknown client(s) {', '.join(unknown)}", file=sys.stderr)
        return 2
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    out: Path = (args.out or REPO / "runs" / "bench-clients" / stamp).resolve()
    out.mkdir(parents=True, exist_ok=True)
    if args.stream_cost:
        return _stream_cost(args, out)
    if args.limit:
        return _limit(args, out)
    host = machine()
    print(
        f"[machine] nproc {host['nproc']}, {host['cpu_model']}, Linux {host['kernel']}, "
        f"Python {host['python']}; {pinning_note()}",
        flush=True,
    )
    skipped: dict[str, str] = {}
    runners = _runners(clients, args.venvs.resolve(), out, skipped)
    results: list[RowResult] = []
    commands: dict[str, list[str]] = {}
    for row in rows:
        for client, runner in runners.items():
            load = os.getloadavg()[0]
            print(f"[run] {row.name} {client}: {row.label} (load {load:.2f}) ...", flush=True)
            try:
                result, cmd = run_one(client, runner, row, out / row.name / client)
            except BenchError as exc:
                print(f"[run] {row.name} {client} failed: {exc}", flush=True)
                skipped[f"{client} on {row.name}"] = str(exc)
                continue
            result = dataclasses.replace(
                result, notes=(*result.notes, f"1-min load {load:.2f} before")
            )
            results.append(result)
            commands[f"{row.name}/{client}"] = cmd
            print(
                f"[run] {row.name} {client}: CPU/request {result.cpu_per_request_ms:.2f} ms, "
                f"lag p99 {result.lag_ms.get('p99') or 0:.2f} ms, added TTFT p99 "
                f"{result.added_ttft_ms.get('p99') or 0:.2f} ms",
                flush=True,
            )
            time.sleep(1.0)
    text = table(rows, results, skipped)
    full = (
        f"Machine: nproc {host['nproc']}, {host['cpu_model']}; {pinning_note()}.\n"
        f"Counterpart: TTFT {rows[0].ttft_ms:g} ms after the request body, then one token "
        f"every {rows[0].token_ms:g} ms (one SSE chunk per token).\n\n"
        + text
        + "\n"
        + detail(results)
    )
    (out / "table.md").write_text(full)
    doc = {
        "format": "narwhal.bench.clients",
        "format_version": 1,
        "created": stamp,
        "machine": host,
        "pinning": pinning_note(),
        "quick": args.quick,
        "rows": [dataclasses.asdict(r) for r in rows],
        "results": [dataclasses.asdict(r) for r in results],
        "skipped": skipped,
        "commands": commands,
    }
    (out / "results.json").write_text(json.dumps(doc, indent=2, default=list) + "\n")
    print()
    print(full)
    print(f"results and logs in {out}")
    return 0 if results else 1
