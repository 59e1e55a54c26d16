"""How long ``read_trace`` takes, and how much memory, on a 100,000-row trace of each format.

For each format (Mooncake JSONL with 2-40 ``hash_ids`` a row, BurstGPT CSV with 1 % failures,
Azure CSV with 7-digit datetimes) a file of ``--rows`` rows is generated in a temporary folder
(seeded: the same files every run), then read by a fresh Python process (so one format's memory
does not hide another's) that reports:

- ``seconds``: the wall time of ``read_trace`` (the whole file read, checked and windowed);
- ``peak MiB``: the process's peak RSS (``resource.getrusage().ru_maxrss``) after the read;
- ``+MiB``: the peak's growth over the same reading taken just before the read (after imports).

Run: ``.venv/bin/python bench/trace_read.py [--rows 100000] [--repeat 3]`` (the best of the
repeats is shown for the time; the memory is the first read's).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from narwhal_trial.workload._trace import TRACE_FORMATS, TraceFormat, read_trace

NAMES: dict[TraceFormat, str] = {
    "mooncake": "mooncake.jsonl",
    "burstgpt": "burstgpt.csv",
    "azure": "azure.csv",
}


def _lengths(rng: np.random.Generator, rows: int) -> tuple[list[int], list[int]]:
    inputs = np.clip(rng.lognormal(np.log(2000), 0.8, rows), 1, 100_000).astype(int)
    outputs = np.clip(rng.lognormal(np.log(200), 0.7, rows), 1, 8_000).astype(int)
    return inputs.tolist(), outputs.tolist()


def _times_s(rng: np.random.Generator, rows: int) -> list[float]:
    return [float(t) for t in np.cumsum(rng.exponential(0.05, rows))]


def write_mooncake(path: Path, rows: int, rng: np.random.Generator) -> None:
    inputs, outputs = _lengths(rng, rows)
    times = _times_s(rng, rows)
    with path.open("w") as fh:
        for t, i, o in zip(times, inputs, outputs, strict=True):
            blocks = min(-(-i // 512), int(rng.integers(2, 41)))
            ids = ", ".join(str(b) for b in rng.integers(0, 50_000, blocks).tolist())
            fh.write(
                f'{{"timestamp": {round(t * 1000)}, "input_length": {i}, '
                f'"output_length": {o}, "hash_ids": [{ids}]}}\n'
            )


def write_burstgpt(path: Path, rows: int, rng: np.random.Generator) -> None:
    inputs, outputs = _lengths(rng, rows)
    times = _times_s(rng, rows)
    failed = (rng.random(rows) < 0.01).tolist()
    with path.open("w") as fh:
        fh.write("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n")
        for t, i, o, f in zip(times, inputs, outputs, failed, strict=True):
            o = 0 if f else o
            fh.write(f"{t:.0f},ChatGPT,{i},{o},{i + o},Conversation log\n")


def write_azure(path: Path, rows: int, rng: np.random.Generator) -> None:
    inputs, outputs = _lengths(rng, rows)
    times = _times_s(rng, rows)
    start = np.datetime64("2023-11-16T18:15:46", "ns")
    with path.open("w") as fh:
        fh.write("TIMESTAMP,ContextTokens,GeneratedTokens\n")
        for t, i, o in zip(times, inputs, outputs, strict=True):
            stamp = str(start + np.timedelta64(round(t * 1e9), "ns")).replace("T", " ")
            fh.write(f"{stamp[:27]},{i},{o}\n")  # seven fractional digits, as Azure's


WRITERS = {"mooncake": write_mooncake, "burstgpt": write_burstgpt, "azure": write_azure}


def _maxrss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def measure_one(fmt: TraceFormat, path: Path, repeat: int) -> dict[str, float]:
    """Read ``path`` ``repeat`` times in this process: the best time, and the peak RSS."""
    before = _maxrss_mib()
    best = float("inf")
    requests = 0
    peak = 0.0
    for n in range(repeat):
        t0 = time.perf_counter()
        trace = read_trace(path, trace_format=fmt)
        best = min(best, time.perf_counter() - t0)
        requests = len(trace.requests)
        if n == 0:
            peak = _maxrss_mib()
        del trace
    return {"seconds": best, "peak_mib": peak, "before_mib": before, "requests": requests}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--one", nargs=2, metavar=("FORMAT", "FILE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        fmt, file = args.one
        print(json.dumps(measure_one(fmt, Path(file), args.repeat)))
        return
    with tempfile.TemporaryDirectory(prefix="narwhal-trace-bench-") as folder:
        print(f"read_trace, {args.rows:,} rows a file, best of {args.repeat}")
        head = ("format", "MB", "requests", "seconds", "peak MiB", "+MiB")
        print(f"{head[0]:<10} {head[1]:>6} {head[2]:>9} {head[3]:>8} {head[4]:>9} {head[5]:>6}")
        for seed, fmt in enumerate(TRACE_FORMATS):
            path = Path(folder) / NAMES[fmt]
            WRITERS[fmt](path, args.rows, np.random.default_rng(seed))
            out = subprocess.run(
                [sys.executable, __file__, "--repeat", str(args.repeat), "--one", fmt, str(path)],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            r = json.loads(out)
            size = path.stat().st_size / 1e6
            growth = r["peak_mib"] - r["before_mib"]
            print(
                f"{fmt:<10} {size:>6.1f} {r['requests']:>9,} {r['seconds']:>8.3f} "
                f"{r['peak_mib']:>9.1f} {growth:>6.1f}"
            )


if __name__ == "__main__":
    main()
