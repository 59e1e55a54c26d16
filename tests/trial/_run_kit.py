"""A finished run folder written by hand from given timings (``predict --calibrate`` tests)."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import orjson

from narwhal_trial import Manifest, RequestRecord
from narwhal_trial._summary import RunFacts, summarize


def write_run(
    out: Path,
    *,
    rate: float,
    input_tokens: int,
    output_tokens: int,
    ttft_s: list[float],
    tpot_s: list[float],
    schedule_valid: bool = True,
) -> Path:
    """A run of ``len(ttft_s)`` completed requests at ``rate`` with these TTFTs and TPOTs (a
    lag of 0.2 s on every offer when ``schedule_valid`` is false)."""
    out.mkdir(parents=True)
    run_id = f"trial-calibration-{rate:g}"
    lag = 0.0004 if schedule_valid else 0.2
    records = []
    for n, (ttft, tpot) in enumerate(zip(ttft_s, tpot_s, strict=True)):
        due = n / rate
        sent = due + lag
        end = sent + ttft + tpot * (output_tokens - 1)
        records.append(
            RequestRecord.model_validate({
                "sequence": n, "request_id": f"{run_id}-{n:06d}", "due_s": due, "sent": True,
                "sent_s": sent, "lag_s": lag, "end_s": end, "in_flight": 1,
                "status": "completed", "miss_reason": None, "http_status": 200, "error": None,
                "ttft_s": ttft, "tpot_s": tpot, "e2e_s": end - sent,
                "prompt_tokens": input_tokens, "completion_tokens": output_tokens,
                "chunks": output_tokens, "finish_reason": "length", "bytes_sent": 4000,
                "bytes_received": 6000, "good": True,
            })
        )  # fmt: skip
    requests = len(records)
    facts = RunFacts(run_id=run_id, requests=requests, rate=rate, attainment=Decimal("0.9"),
                     max_lag_s=0.05, max_in_flight_seen=4, cpu_user_s=1.0, cpu_system_s=0.1,
                     peak_rss_bytes=70_000_000, loop_lag_s=[0.0004, 0.0011, 0.002],
                     warmup_status="completed", drain_s=[0.1, 0.1])  # fmt: skip
    summary = summarize(records, facts)
    manifest = Manifest(
        run_id=run_id, base_url="http://127.0.0.1:9100", start_time="2026-12-02T10:00:00+00:00",
        workload_path="/runs/t/workload/workload.json", workload_digest="ab" * 32,
        helper_digest="cd" * 32, helper_files={"load_trial.py": "ef" * 32}, helper_version="0.1.0",
        hostname="testhost", source_revision="0" * 40, source_dirty=False,
        command=["load_trial.py", "run", "--rate", f"{rate:g}"], python_version="CPython 3.11.7",
        httpx_version="0.28.1", event_loop="asyncio",
        limits={"max_in_flight": 64, "max_lag_s": 0.05, "request_timeout_s": 600.0,
                "drain_timeout_s": 60.0, "drain_gauges": [], "stream_transport": "raw",
                "drain_preset": None},
        arguments={"rate": rate}, model="sim/tiny", requests=requests, rate=rate,
        ttft_s="1", tpot_s="0.1", attainment="0.9", input_tokens=input_tokens,
        output_tokens=output_tokens, warmup_request_id=f"{run_id}-warmup",
    )  # fmt: skip
    (out / "manifest.json").write_bytes(orjson.dumps(manifest.model_dump(mode="json")))
    (out / "requests.jsonl").write_bytes(
        b"".join(orjson.dumps(r.model_dump(mode="json")) + b"\n" for r in records)
    )
    (out / "summary.json").write_bytes(orjson.dumps(summary.model_dump(mode="json", by_alias=True)))
    return out
