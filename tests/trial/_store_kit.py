"""Hand-made profile stores for the trial's tests (``check`` and ``predict``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

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

TINY_PREFILL = {"a": 0.004, "b": 1e-7, "c": 0.0}
TINY_DECODE = {"d0": 0.002, "d1": 1e-5, "d2": 0.0}
_COLOCATION = {
    "prefill_rps": 0.5,
    "decode_rps": 0.25,
    "prefill_tokens": 512,
    "decode_input_tokens": 128,
    "decode_output_tokens": 32,
}


def write_profiles(
    fleet_path: Path,
    lengths: list[int],
    input_lens: list[int],
    decode_errors: tuple[float, float] = (0.02, 0.05),
    *,
    fits: dict[str, tuple[dict[str, float], dict[str, float]]] | None = None,
    prefill_worst: float | None = None,
    concurrency: list[int] | None = None,
    colocated: bool = False,
    samples: tuple[list[dict[str, Any]], list[dict[str, Any]]] | None = None,
    profile_extra: dict[str, Any] | None = None,
) -> Path:
    """A store (with sidecar) holding one profile per fleet engine over the given domain, whose
    decode fit has the given mean and worst-point relative errors. ``fits`` gives an engine's
    prefill and decode coefficients (default: the tiny preset's), ``prefill_worst`` a prefill fit
    worst-point relative error, ``concurrency`` the decode domain's levels (default 1, 4),
    ``colocated`` marks the profiles as measured with neighbour traffic; ``samples`` replaces every
    engine's sidecar prefill and decode samples (default: one repeat per length exactly on the
    fit, no cohort); ``profile_extra`` adds keys to every profile (``scheduler``,
    ``mixing_fit``)."""
    fleet = load_fleet(fleet_path)
    profiles, entries = [], []
    levels = concurrency or [1, 4]
    for engine in fleet.config.engines:
        prefill, decode = (fits or {}).get(engine.iid, (TINY_PREFILL, TINY_DECODE))
        key = profile_key(fleet, engine.iid).model_dump(mode="json")
        facts = {
            "url": engine.url,
            "model": "sim/tiny",
            "root": "sim/tiny",
            "max_model_len": 32768,
            "version": "0.33.0",
        }
        evidence = {**facts, "process_start_time_seconds": 1.0}
        digest = sha256_hex(canonical_json(evidence))
        decode_fit: dict[str, Any] = {
            "form": "tpot-batch-context-v1",
            "coefficients": decode,
            "domain": {
                "concurrency": levels,
                "ctx_min": 500.0,
                "ctx_max": 5000.0,
                "input_lens": input_lens,
            },
            "mean_rel_error": decode_errors[0],
            "worst_rel_error": decode_errors[1],
            "worst_point": [4.0, 2100.0],
        }
        profiles.append(
            {
                "key": key,
                "binding": {"kind": "identity", "generation": digest, "sha256": digest},
                "engine": facts,
                "prefill_fit": {
                    "form": "ttft-quadratic-v1",
                    "coefficients": prefill,
                    "domain": {
                        "min_len": min(lengths),
                        "max_len": max(lengths),
                        "lengths": lengths,
                    },
                    **(
                        {}
                        if prefill_worst is None
                        else {"mean_rel_error": prefill_worst, "worst_rel_error": prefill_worst}
                    ),
                },
                "decode_fit": decode_fit,
                "colocation": _COLOCATION if colocated else None,
                "samples_sha256": PENDING_SHA256,
                **(profile_extra or {}),
            }
        )
        entries.append(
            {
                "key": key,
                "evidence": {"before": evidence, "after": evidence},
                "settings": {
                    "prefill_lens": lengths,
                    "decode_input_lens": input_lens,
                    "decode_concurrency": levels,
                    "decode_tokens": 8,
                    "prefill_repeats": 1,
                    "decode_repeats": 1,
                    "limits_applied": {"max_num_seqs": 64},
                    "prompt_seed": 0,
                },
                "prefill_samples": [  # one repeat on the fit: the Monte Carlo adds no spread
                    prefill_sample(n, [prefill["a"] + prefill["b"] * n + prefill["c"] * n * n])
                    for n in lengths
                ]
                if samples is None
                else samples[0],
                "decode_samples": [] if samples is None else samples[1],
                "neighbours": [],
                "decode_fit": decode_fit,
            }
        )
    store, sidecar = new_documents(
        mode="live",
        fleet_sha256=fleet.sha256,
        generator=Generator(name="narwhal-profile", version="0.1.0"),
        profiles=[Profile.model_validate(p) for p in profiles],
        samples=[ProfileSamples.model_validate(e) for e in entries],
        created_at="2026-11-30T05:00:00+00:00",
    )
    path = fleet_path.parent / "profiles" / "fleet-profiles.json"
    path.parent.mkdir(exist_ok=True)
    write_store(path, store, sidecar, mode="fresh")
    return path


def prefill_sample(length: int, ttft_s: list[float]) -> dict[str, Any]:
    """A sidecar prefill point: one TTFT per repeat."""
    return {
        "length": length,
        "ttft_s": ttft_s,
        "request_ids": [f"p-{length}-{k}" for k in range(len(ttft_s))],
    }


def decode_sample(
    input_len: int, gaps_s: list[list[float]], tpot_s: float, ctx: float, repeat: int = 0
) -> dict[str, Any]:
    """A valid sidecar decode cohort: one stream per gap list (one token per chunk, every stream
    sent at 0 and its first token at 10 ms), stored with the given cohort TPOT and context."""
    streams = []
    for k, gaps in enumerate(gaps_s):
        t = 10_000_000
        times = [t]
        for g in gaps:
            t += round(g * 1e9)
            times.append(t)
        streams.append(
            {
                "request_id": f"d-{input_len}-{repeat}-{k}",
                "send_ns": 0,
                "chunk_ns": times,
                "chunk_tokens": [1] * len(times),
            }
        )
    return {
        "input_len": input_len,
        "concurrency": len(gaps_s),
        "repeat": repeat,
        "valid": True,
        "streams": streams,
        "tpot_s": tpot_s,
        "ctx": ctx,
    }


def one_engine_store(
    folder: Path, fits: tuple[dict[str, float], dict[str, float]]
) -> tuple[Path, Path]:
    """A fleet of one mixed engine ``e`` in ``folder`` and its store with ``fits``: prefill
    lengths 128 and 1,024, decode input 512 at concurrency 1 to 16."""
    fleet = folder / "fleet.json"
    fleet.write_text(
        json.dumps({
            "format": "narwhal.fleet", "format_version": 1,
            "profiles": {"path": "profiles/fleet-profiles.json"},
            "engines": [{"iid": "e", "url": "http://127.0.0.1:9100", "role": "mixed"}],
        })
    )  # fmt: skip
    store = write_profiles(fleet, [128, 1024], [512], fits={"e": fits}, concurrency=[1, 4, 8, 16])
    return fleet, store
