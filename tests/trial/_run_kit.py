"""A finished run folder written by hand from given timings (``predict --calibrate`` tests)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from narwhal_trial import RequestRecord

from ..report._kit import write_run_folder


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
    return write_run_folder(
        out,
        records,
        run_id=run_id,
        rate=rate,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
    )


def write_lognormal_run(
    out: Path, seed: int, *, tpot_factor: float = 1.0, valid: bool = True
) -> Path:
    """200 completed requests at 4 request/s: TTFT around 0.4 s, TPOT around 20 ms (times
    ``tpot_factor``), lognormal with ``seed``; every offer 0.2 s late when not ``valid``."""
    rng = np.random.default_rng(seed)
    ttft = rng.lognormal(np.log(0.4), 0.25, 200).tolist()
    tpot = (rng.lognormal(np.log(0.02), 0.1, 200) * tpot_factor).tolist()
    return write_run(
        out, rate=4.0, input_tokens=8192, output_tokens=128, ttft_s=ttft, tpot_s=tpot,
        schedule_valid=valid,
    )  # fmt: skip
