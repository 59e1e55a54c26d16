"""AIPerf 0.13.0 and guidellm 0.8.1 as benchmark clients: command lines and their result files.

Both are told the same thing as narwhal-trial: constant arrivals at the row's rate, the row's
request count, a 512-token prompt and exactly ``output_tokens`` streamed tokens from
``/v1/completions``, with the locally built tokenizer. Offline, AIPerf loads a local tokenizer
path only *without* ``HF_HUB_OFFLINE=1``, so the variable is removed from AIPerf's environment;
guidellm works with it, so it is set there.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ._measures import ClientReport
from ._proc import BenchError, Finished, run_measured
from ._rows import Row
from ._venvs import Venv

MODEL = "counterpart"
SEED = 1729
_UNIT_S = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0, "sec": 1.0}


def _timeout(row: Row) -> float:
    return row.requests / row.rate * 10 + 300


def aiperf_argv(venv: Venv, row: Row, url: str, tokenizer: Path, out: Path) -> list[str]:
    """``aiperf profile`` for one row: constant rate, fixed ISL/OSL, streaming completions."""
    return [
        str(venv.script),
        "profile",
        "--model",
        MODEL,
        "--url",
        url,
        "--endpoint-type",
        "completions",
        "--streaming",
        "--tokenizer",
        str(tokenizer),
        "--request-rate",
        f"{row.rate:g}",
        "--arrival-pattern",
        "constant",
        "--request-count",
        str(row.requests),
        "--isl",
        str(row.input_tokens),
        "--isl-stddev",
        "0",
        "--osl",
        str(row.output_tokens),
        "--osl-stddev",
        "0",
        "--extra-inputs",
        f"min_tokens:{row.output_tokens}",
        "--extra-inputs",
        "ignore_eos:true",
        "--random-seed",
        str(SEED),
        "--ui",
        "none",
        "--no-server-metrics",
        "--no-gpu-telemetry",
        "--artifact-dir",
        str(out),
    ]


def run_aiperf(
    venv: Venv, tokenizer: Path, row: Row, url: str, folder: Path
) -> tuple[Finished, ClientReport, list[str]]:
    """Run AIPerf pinned and read ``profile_export.jsonl`` (one record per request)."""
    out = folder / "aiperf"
    argv = aiperf_argv(venv, row, url, tokenizer, out)
    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_OFFLINE"}
    done = run_measured(
        argv, cwd=folder, log=folder / "client.log", timeout_s=_timeout(row), env=env
    )
    if done.exit_code != 0:
        raise BenchError(f"aiperf exited {done.exit_code}; see {folder / 'client.log'}")
    return done, _aiperf_report(out / "profile_export.jsonl"), argv


def _seconds(metric: Any) -> float | None:
    if not isinstance(metric, dict) or not isinstance(metric.get("value"), int | float):
        return None
    scale = _UNIT_S.get(str(metric.get("unit", "ms")))
    return None if scale is None else float(metric["value"]) * scale


def _aiperf_report(path: Path) -> ClientReport:
    if not path.is_file():
        raise BenchError(f"AIPerf wrote no {path.name}")
    ttft: list[float] = []
    tpot: list[float] = []
    ids: set[str] = set()
    with path.open("rb") as fh:
        for line in fh:
            rec: dict[str, Any] = json.loads(line)
            meta = rec.get("metadata") or {}
            if meta.get("benchmark_phase", "profiling") != "profiling":
                continue
            if meta.get("x_request_id"):
                ids.add(str(meta["x_request_id"]))
            if meta.get("was_cancelled") or rec.get("error"):
                continue
            metrics = rec.get("metrics") or {}
            if (t := _seconds(metrics.get("time_to_first_token"))) is not None:
                ttft.append(t)
            # AIPerf's per-request "inter_token_latency" = (latency - TTFT) / (OSL - 1): vLLM TPOT
            if (p := _seconds(metrics.get("inter_token_latency"))) is not None:
                tpot.append(p)
    return ClientReport(ttft_s=ttft, tpot_s=tpot, request_ids=ids or None)


def guidellm_argv(venv: Venv, row: Row, url: str, tokenizer: Path, out: Path) -> list[str]:
    """``guidellm run`` for one row: constant profile, max_requests, synthetic fixed lengths."""
    backend = (
        f"kind=openai_http,target={url},model={MODEL},request_format=/v1/completions,http2=false"
    )
    data = f"kind=synthetic_text,prompt_tokens={row.input_tokens},output_tokens={row.output_tokens}"
    return [
        str(venv.script),
        "run",
        "--backend",
        backend,
        "--profile",
        f"kind=constant,rate={row.rate:g}",
        "--constraint",
        f"kind=max_requests,count={row.requests}",
        "--tokenizer",
        f"kind=huggingface_auto,model={tokenizer}",
        "--data",
        data,
        "--output",
        f"kind=json,path={out}",
        "--disable-console-interactive",
    ]


def run_guidellm(
    venv: Venv, tokenizer: Path, row: Row, url: str, folder: Path
) -> tuple[Finished, ClientReport, list[str]]:
    """Run guidellm pinned and read the per-request records of its JSON report."""
    out = folder / "benchmarks.json"
    argv = guidellm_argv(venv, row, url, tokenizer, out)
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    done = run_measured(
        argv, cwd=folder, log=folder / "client.log", timeout_s=_timeout(row), env=env
    )
    if done.exit_code != 0:
        raise BenchError(f"guidellm exited {done.exit_code}; see {folder / 'client.log'}")
    return done, _guidellm_report(out), argv


def _guidellm_report(path: Path) -> ClientReport:
    if not path.is_file():
        raise BenchError(f"guidellm wrote no {path.name}")
    doc: dict[str, Any] = json.loads(path.read_text())
    benchmarks = doc.get("benchmarks") or []
    if not benchmarks:
        raise BenchError(f"{path} holds no benchmark")
    bench = benchmarks[0]
    ttft: list[float] = []
    tpot: list[float] = []
    for rec in (bench.get("requests") or {}).get("successful") or []:
        if isinstance(rec.get("time_to_first_token_ms"), int | float):
            ttft.append(rec["time_to_first_token_ms"] / 1e3)
        # guidellm's "inter_token_latency_ms" excludes the first token (vLLM's TPOT); its
        # "time_per_output_token_ms" includes it
        if isinstance(rec.get("inter_token_latency_ms"), int | float):
            tpot.append(rec["inter_token_latency_ms"] / 1e3)
    notes: list[str] = []
    for warning in bench.get("warnings") or []:
        text = warning.get("message") if isinstance(warning, dict) else warning
        notes.append(f"guidellm warning: {str(text)[:160]}")
    errored = len((bench.get("requests") or {}).get("errored") or [])
    if errored:
        notes.append(f"{errored} errored requests")
    return ClientReport(ttft_s=ttft, tpot_s=tpot, request_ids=None, notes=tuple(notes))
