"""Inputs for the report's tests, built through the libraries' own models without waiting: a
three-engine profile store (examples/sim-fleet.json) with realistic samples, and trial run folders
of any size whose records follow a queue model."""

from __future__ import annotations

import shutil
import statistics
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from narwhal_store import (
    PENDING_SHA256,
    Generator,
    Profile,
    ProfileSamples,
    canonical_json,
    load_fleet,
    new_documents,
    profile_key,
    sha256_hex,
    write_store,
)
from narwhal_trial import EdgeSearch, Manifest, RequestRecord
from narwhal_trial.run._summary import RunFacts, summarize

REPO = Path(__file__).resolve().parents[2]
PREFILL = {"a": 0.0144, "b": 1.84e-5, "c": 6.0e-10}
DECODE = {"d0": 0.0053, "d1": 1.7e-7, "d2": 3.0e-8}
LENGTHS = [2048, 4096, 8192, 12288]
INPUT_LENS = [4096, 8192]
LEVELS = [1, 4, 8, 16]
DECODE_TOKENS = 64


def _ttft(n: float) -> float:
    return PREFILL["a"] + PREFILL["b"] * n + PREFILL["c"] * n * n


def _tpot(n: float, ctx: float) -> float:
    return DECODE["d0"] + DECODE["d1"] * n + DECODE["d2"] * n * ctx


def _rel_errors(pairs: list[tuple[float, float]]) -> tuple[float, float]:
    errors = [abs(fit - y) / y for y, fit in pairs]
    return statistics.fmean(errors), max(errors)


def write_store_fixture(folder: Path, *, decode_noise: float = 0.02, bursty: bool = False) -> Path:
    """The example fleet as ``folder/fleet.json`` and a store of its three engines in
    ``folder/profiles/``; ``decode_noise`` scales the decode samples' scatter (0.6: a suspect
    fit), ``bursty`` marks one cohort per engine as delivered in bursts."""
    folder.mkdir(parents=True, exist_ok=True)
    fleet_path = folder / "fleet.json"
    shutil.copyfile(REPO / "examples" / "sim-fleet.json", fleet_path)
    fleet = load_fleet(fleet_path)
    rng = np.random.default_rng(7)
    profiles, entries = [], []
    for engine in fleet.config.engines:
        key = profile_key(fleet, engine.iid).model_dump(mode="json")
        facts = {"url": engine.url, "model": "llama-3.1-8b", "root": "meta-llama/Llama-3.1-8B",
                 "max_model_len": 16384, "version": "0.11.0"}  # fmt: skip
        evidence = {**facts, "process_start_time_seconds": 1764590000.5}
        digest = sha256_hex(canonical_json(evidence))
        prefill = [
            {"length": n, "ttft_s": [_ttft(n) * (1 + rng.normal(0, 0.03)) for _ in range(5)],
             "request_ids": [f"p-{engine.iid}-{n}-{r}" for r in range(5)]}
            for n in LENGTHS
        ]  # fmt: skip
        cohorts = []
        for input_len in INPUT_LENS:
            for n in LEVELS:
                ctx = input_len + DECODE_TOKENS / 2
                cohorts.append(
                    {"input_len": input_len, "concurrency": n, "repeat": 0, "valid": True,
                     "streams": [],
                     "tpot_s": _tpot(n, ctx) * max(0.2, 1 + rng.normal(0, 1) * decode_noise),
                     "ctx": ctx, "burst_share": 0.4 if bursty and n == 16 else 0.0}
                )  # fmt: skip
        cohorts.append({"input_len": 8192, "concurrency": 16, "repeat": 1, "valid": False,
                        "reason": "waiting requests during the cohort", "streams": []})  # fmt: skip
        pre_mean, pre_worst = _rel_errors(
            [(statistics.median(s["ttft_s"]), _ttft(s["length"])) for s in prefill]
        )
        dec_mean, dec_worst = _rel_errors(
            [(c["tpot_s"], _tpot(c["concurrency"], c["ctx"])) for c in cohorts if c["valid"]]
        )
        decode_fit: dict[str, Any] = {
            "form": "tpot-batch-context-v1", "coefficients": DECODE,
            "domain": {"concurrency": LEVELS, "ctx_min": 4096.0, "ctx_max": 8256.0,
                       "input_lens": INPUT_LENS},
            "mean_rel_error": dec_mean, "worst_rel_error": dec_worst, "worst_point": [16.0, 8224.0],
        }  # fmt: skip
        profiles.append({
            "key": key,
            "binding": {"kind": "identity", "generation": digest, "sha256": digest},
            "engine": facts,
            "prefill_fit": {
                "form": "ttft-quadratic-v1", "coefficients": PREFILL,
                "domain": {"min_len": LENGTHS[0], "max_len": LENGTHS[-1], "lengths": LENGTHS},
                "mean_rel_error": pre_mean, "worst_rel_error": pre_worst,
            },
            "decode_fit": decode_fit,
            "colocation": None,
            "samples_sha256": PENDING_SHA256,
        })  # fmt: skip
        entries.append({
            "key": key,
            "evidence": {"before": evidence, "after": evidence},
            "settings": {"prefill_lens": LENGTHS, "decode_input_lens": INPUT_LENS,
                         "decode_concurrency": LEVELS, "decode_tokens": DECODE_TOKENS,
                         "prefill_repeats": 5, "decode_repeats": 1,
                         "limits_applied": None, "prompt_seed": 1},
            "prefill_samples": prefill,
            "decode_samples": cohorts,
            "neighbours": [],
            "decode_fit": decode_fit,
        })  # fmt: skip
    store, sidecar = new_documents(
        mode="live",
        fleet_sha256=fleet.sha256,
        generator=Generator(name="narwhal-profile", version="0.1.0"),
        profiles=[Profile.model_validate(p) for p in profiles],
        samples=[ProfileSamples.model_validate(e) for e in entries],
        created_at="2026-12-01T10:00:00+00:00",
    )
    path = folder / "profiles" / "fleet-profiles.json"
    path.parent.mkdir(exist_ok=True)
    write_store(path, store, sidecar, mode="fresh")
    return path


def write_run_fixture(
    out: Path,
    *,
    rate: float,
    requests: int = 200,
    service_s: float = 1.0,
    misses: int = 0,
    errors: int = 0,
    ttft_s: str = "2",
) -> Path:
    """A finished run folder at ``rate``: requests queue on one server of ``service_s`` each (so a
    rate above 1/service_s falls behind and misses its TTFT); the last ``misses`` offers are
    schedule misses and ``errors`` offers in the middle are HTTP errors; ``ttft_s``: the TTFT
    SLO the records are judged by."""  # fmt: skip
    out.mkdir(parents=True)
    run_id = f"trial-fixture-{rate:g}"
    records: list[RequestRecord] = []
    free_at = 0.0
    step = max(1, (requests - misses - 3) // max(errors, 1))
    error_at = {3 + k * step for k in range(errors)}
    for n in range(requests):
        due = n / rate
        rid = f"{run_id}-{n:06d}"
        if n >= requests - misses:
            records.append(_record(n, rid, due, status="client_schedule_miss"))
            continue
        sent = due + 0.0004 + 0.0002 * (n % 5)
        if n in error_at:
            records.append(_record(n, rid, due, sent=sent, end=sent + 0.01, status="http_error"))
            continue
        start = max(sent, free_at)
        free_at = start + service_s * 0.3  # prefill occupies the server; decode overlaps
        ttft = start - sent + 0.24
        tpot = 0.0056 + 0.0001 * (n % 7)
        end = sent + ttft + tpot * 127
        good = ttft <= float(ttft_s) and tpot <= 0.0333
        records.append(
            _record(n, rid, due, sent=sent, end=end, status="completed", ttft=ttft, tpot=tpot,
                    good=good)
        )  # fmt: skip
    return write_run_folder(out, records, run_id=run_id, rate=rate, ttft_s=ttft_s)


def write_run_folder(
    out: Path,
    records: list[RequestRecord],
    *,
    run_id: str,
    rate: float,
    input_tokens: int = 8192,
    output_tokens: int = 128,
    ttft_s: str = "2",
) -> Path:
    """``manifest.json``, ``requests.jsonl`` and ``summary.json`` of a run of ``records`` at
    ``rate`` against a TTFT SLO of ``ttft_s`` (the summary from the records as ``run`` writes it:
    an offer late by more than 0.05 s makes the schedule invalid) in the existing folder
    ``out``."""
    requests = len(records)
    facts = RunFacts(run_id=run_id, requests=requests, rate=rate, attainment=Decimal("0.95"),
                     max_lag_s=0.05, max_in_flight_seen=12, cpu_user_s=4.2, cpu_system_s=0.4,
                     peak_rss_bytes=70_000_000, loop_lag_s=[0.0004, 0.0011, 0.002],
                     warmup_status="completed", drain_s=[0.1, 0.1])  # fmt: skip
    summary = summarize(records, facts)
    manifest = Manifest(
        run_id=run_id, base_url="http://127.0.0.1:18000", start_time="2026-12-01T10:00:00+00:00",
        workload_path="/runs/t/workload/workload.json", workload_digest="ab" * 32,
        helper_digest="cd" * 32, helper_files={"load_trial.py": "ef" * 32}, helper_version="0.1.0",
        hostname="testhost", source_revision="0" * 40, source_dirty=False,
        command=["load_trial.py", "run", "--rate", f"{rate:g}"], python_version="CPython 3.11.7",
        httpx_version="0.28.1", event_loop="asyncio",
        limits={"max_in_flight": 64, "max_lag_s": 0.05, "request_timeout_s": 600.0,
                "drain_timeout_s": 60.0, "drain_gauges": ["narwhal_router_resident_requests"],
                "stream_transport": "raw", "drain_preset": "narwhal-router"},
        arguments={"rate": rate}, model="llama-3.1-8b", requests=requests, rate=rate,
        ttft_s=ttft_s, tpot_s="0.0333", attainment="0.95", input_tokens=input_tokens,
        output_tokens=output_tokens, warmup_request_id=f"{run_id}-warmup",
    )  # fmt: skip
    (out / "manifest.json").write_bytes(orjson.dumps(manifest.model_dump(mode="json")))
    (out / "requests.jsonl").write_bytes(
        b"".join(orjson.dumps(r.model_dump(mode="json")) + b"\n" for r in records)
    )
    (out / "summary.json").write_bytes(orjson.dumps(summary.model_dump(mode="json", by_alias=True)))
    return out


def _record(
    n: int, rid: str, due: float, *, status: str, sent: float | None = None,
    end: float | None = None, ttft: float | None = None, tpot: float | None = None,
    good: bool = False,
) -> RequestRecord:  # fmt: skip
    done = status == "completed"
    return RequestRecord.model_validate({
        "sequence": n, "request_id": rid, "due_s": due, "sent": sent is not None, "sent_s": sent,
        "lag_s": (sent if sent is not None else due + 0.051) - due, "end_s": end,
        "in_flight": 3, "status": status,
        "miss_reason": "in_flight_cap" if status == "client_schedule_miss" else None,
        "http_status": 200 if done else (503 if status == "http_error" else None),
        "error": "HTTP 503" if status == "http_error" else None,
        "ttft_s": ttft, "tpot_s": tpot,
        "e2e_s": None if end is None or sent is None else end - sent,
        "prompt_tokens": 8192 if done else None, "completion_tokens": 128 if done else None,
        "chunks": 128 if done else 0, "finish_reason": "length" if done else None,
        "bytes_sent": 40000 if sent is not None else 0, "bytes_received": 60000 if done else 0,
        "good": good,
    })  # fmt: skip


def edge_trial(
    folder: Path, index: int, rate: float, run: str, verdict: str, *, repeat: int = 0
) -> dict[str, Any]:
    """``edge.json``'s row of the trial whose run folder is ``folder / run``, from its summary."""
    s = orjson.loads((folder / run / "summary.json").read_bytes())
    return {
        "index": index, "rate": rate, "run": run, "repeat": repeat, "verdict": verdict,
        "good": s["good"], "required_good": s["required_good"], "requests": s["requests"],
        "attainment": s["attainment"], "client_schedule_valid": s["client_schedule_valid"],
        "exit_code": s["exit_code"], "error": None,
    }  # fmt: skip


def write_edge_document(
    folder: Path,
    trials: list[dict[str, Any]],
    *,
    bracket: tuple[float, float],
    start: str,
    start_rate: float,
    predicted: dict[str, Any] | None = None,
) -> Path:
    """``folder/edge.json`` of a search that ended within tolerance with ``bracket`` (highest
    pass, lowest miss) after ``trials`` (their run folders already in ``folder``)."""
    high, low = bracket
    doc = EdgeSearch.model_validate({
        "generator": "narwhal-trial 0.1.0", "started": "2026-12-01T10:00:00+00:00",
        "command": ["load_trial.py", "edge"],
        "inputs": {
            "base_url": "http://127.0.0.1:18000", "workload": "/runs/t/workload/workload.json",
            "workload_sha256": "ab" * 32, "model": "llama-3.1-8b", "input_tokens": 8192,
            "output_tokens": 128, "requests": 200, "ttft_s": "2", "tpot_s": "0.0333",
            "attainment": "0.95", "max_in_flight": 64, "max_lag_s": 0.05, "tolerance": 0.2,
            "max_trials": 8, "max_repeats": 2, "start": start, "start_rate": start_rate,
            "min_rate": 0.0023, "max_rate": 10000.0,
        },
        "predicted": predicted, "trials": trials,
        "bracket": {"highest_pass": high, "lowest_miss": low, "width": low / high - 1,
                    "within_tolerance": low / high - 1 <= 0.2},
        "stop": "within tolerance", "message": f"bracket found in {len(trials)} trial(s)",
        "exit_code": 0,
    })  # fmt: skip
    (folder / "edge.json").write_bytes(orjson.dumps(doc.model_dump(mode="json")))
    return folder
