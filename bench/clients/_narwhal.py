"""narwhal-trial as a benchmark client: ``prepare`` (unmeasured), then ``run`` (measured)."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ._measures import ClientReport
from ._proc import BenchError, Finished, run_measured
from ._rows import Row

REPO = Path(__file__).resolve().parents[2]
LAUNCHER = REPO / "tools" / "measurement" / "load_trial.py"
SEED = 1729


def _python() -> str:
    venv = REPO / ".venv" / "bin" / "python"
    return str(venv) if venv.exists() else sys.executable


def available() -> str | None:
    """None when the trial can run here, else why not."""
    if not LAUNCHER.is_file():
        return f"{LAUNCHER} is missing"
    return None


def run(
    row: Row, url: str, folder: Path, *, transport: str = "auto", extra: Sequence[str] = ()
) -> tuple[Finished, ClientReport, list[str]]:
    """Prepare a workload of the row's shape against ``url``, then run the trial, pinned.

    ``transport`` is the trial's ``--transport`` (``auto``, the default: raw over http://;
    ``raw`` or ``httpx``). ``extra`` is appended to the ``run`` command line.
    """
    prepared = run_measured(
        [
            _python(),
            str(LAUNCHER),
            "prepare",
            "--base",
            url,
            "--input-tokens",
            str(row.input_tokens),
            "--output-tokens",
            str(row.output_tokens),
            "--seed",
            str(SEED),
            "--out",
            str(folder / "workload"),
        ],
        cwd=REPO,
        log=folder / "prepare.log",
        timeout_s=120,
        core=None,
    )
    if prepared.exit_code != 0:
        raise BenchError(
            f"narwhal-trial prepare exited {prepared.exit_code}; see {folder / 'prepare.log'}"
        )
    argv = [
        _python(),
        str(LAUNCHER),
        "run",
        "--base",
        url,
        "--workload",
        str(folder / "workload" / "workload.json"),
        "--rate",
        f"{row.rate:g}",
        "--requests",
        str(row.requests),
        "--ttft",
        "2",
        "--tpot",
        "0.0333",
        "--attainment",
        "0.95",
        "--out",
        str(folder / "run"),
        "--transport",
        transport,
        *extra,
    ]
    done = run_measured(
        argv, cwd=REPO, log=folder / "client.log", timeout_s=row.requests / row.rate + 300
    )
    if done.exit_code not in (0, 2):
        raise BenchError(f"narwhal-trial run exited {done.exit_code}; see {folder / 'client.log'}")
    return done, _report(folder / "run"), argv


def _report(run_dir: Path) -> ClientReport:
    ttft: list[float] = []
    tpot: list[float] = []
    ids: set[str] = set()
    sequence: dict[str, int] = {}
    with (run_dir / "requests.jsonl").open("rb") as fh:
        for line in fh:
            rec: dict[str, Any] = json.loads(line)
            if rec.get("sent"):
                ids.add(str(rec["request_id"]))
                sequence[str(rec["request_id"])] = int(rec["sequence"])
            if rec.get("status") != "completed":
                continue
            if rec.get("ttft_s") is not None:
                ttft.append(float(rec["ttft_s"]))
            if rec.get("tpot_s") is not None:
                tpot.append(float(rec["tpot_s"]))
    summary: dict[str, Any] = json.loads((run_dir / "summary.json").read_text())
    client = summary.get("client") or {}
    notes: list[str] = []
    own = client.get("cpu_per_sent_request_s")
    if isinstance(own, int | float):
        notes.append(f"own in-run CPU/request {own * 1e3:.2f} ms")
    misses = summary.get("schedule_misses") or {}
    if any(misses.values()):
        notes.append(f"schedule misses {misses}")
    max_lag = summary.get("max_lag_s")
    if isinstance(max_lag, int | float):
        notes.append(f"own max lag {max_lag * 1e3:.1f} ms")
    valid = summary.get("client_schedule_valid")
    return ClientReport(
        ttft_s=ttft,
        tpot_s=tpot,
        request_ids=ids,
        sequence=sequence,
        schedule_valid=valid if isinstance(valid, bool) else None,
        notes=tuple(notes),
    )
