"""End-to-end ``check`` (the runbook's "Before the trial") against a simulated fleet."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from narwhal_sim.testing import SimFleet
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

from .conftest import Cli

pytestmark = pytest.mark.slow


def write_profiles(
    fleet_path: Path,
    lengths: list[int],
    input_lens: list[int],
    decode_errors: tuple[float, float] = (0.02, 0.05),
) -> Path:
    """A store (with sidecar) holding one profile per fleet engine over the given domain, whose
    decode fit has the given mean and worst-point relative errors."""
    fleet = load_fleet(fleet_path)
    profiles, entries = [], []
    for engine in fleet.config.engines:
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
            "coefficients": {"d0": 0.002, "d1": 1e-5, "d2": 0.0},
            "domain": {
                "concurrency": [1, 4],
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
                    "coefficients": {"a": 0.004, "b": 1e-7, "c": 0.0},
                    "domain": {
                        "min_len": min(lengths),
                        "max_len": max(lengths),
                        "lengths": lengths,
                    },
                },
                "decode_fit": decode_fit,
                "colocation": None,
                "samples_sha256": PENDING_SHA256,
            }
        )
        entries.append(
            {
                "key": key,
                "evidence": {"before": evidence, "after": evidence},
                "settings": {
                    "prefill_lens": lengths,
                    "decode_input_lens": input_lens,
                    "decode_concurrency": [1, 4],
                    "decode_tokens": 8,
                    "prefill_repeats": 1,
                    "decode_repeats": 1,
                    "limits_applied": {"max_num_seqs": 64},
                    "prompt_seed": 0,
                },
                "prefill_samples": [
                    {"length": n, "ttft_s": [0.005], "request_ids": [f"p-{n}"]} for n in lengths
                ],
                "decode_samples": [],
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


def _check(cli: Cli, fleet: SimFleet, workload: Path, store: Path, *records: Path) -> Any:
    args = [
        "check",
        "--workload",
        str(workload),
        "--fleet",
        str(fleet.fleet_path),
        "--profiles",
        str(store),
    ]
    for record in records:
        args += ["--launch-record", str(record)]
    return cli(*args)


def test_check_passes_inside_domain_with_caching_off(
    cli: Cli, fresh_fleet: SimFleet, tiny_workload: Path, tmp_path: Path
) -> None:
    """Fits the context, inside the profile domain, prefix caching off everywhere: exit 0."""
    store = write_profiles(fresh_fleet.fleet_path, [256, 1024, 4096], [512, 2048])
    record = tmp_path / "launch-e0.txt"
    record.write_text("vllm serve sim/tiny --max-model-len 32768 --no-enable-prefix-caching\n")
    proc = _check(cli, fresh_fleet, tiny_workload, store, record)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "FAIL" not in proc.stdout
    for what in ("prefill domain", "decode domain", "context limit", "prefix caching off"):
        assert what in proc.stdout
    assert "ok   e0: decode fit quality: mean relative error 2.0%, worst 5.0%" in proc.stdout


@pytest.mark.parametrize(("mean", "worst"), [(0.75, 0.99), (0.21, 0.3), (0.1, 0.51)])
def test_check_fails_a_decode_fit_beyond_the_bounds(
    cli: Cli, fresh_fleet: SimFleet, tiny_workload: Path, tmp_path: Path, mean: float, worst: float
) -> None:
    """A decode fit beyond 20% mean or 50% worst error never silently feeds a trial: exit 2,
    with the figures shown."""
    store = write_profiles(fresh_fleet.fleet_path, [256, 1024, 4096], [512, 2048], (mean, worst))
    record = tmp_path / "launch-e0.txt"
    record.write_text("vllm serve sim/tiny --max-model-len 32768 --no-enable-prefix-caching\n")
    proc = _check(cli, fresh_fleet, tiny_workload, store, record)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    failing = [line for line in proc.stdout.splitlines() if line.startswith("FAIL")]
    assert len(failing) == 1, proc.stdout
    assert failing[0].startswith(
        f"FAIL e0: decode fit quality: mean relative error {mean:.1%}, worst {worst:.1%} "
        "at (concurrency, ctx) [4.0, 2100.0]"
    )
    assert "exceeds" in failing[0] and "re-profile this engine" in failing[0]


def test_check_lists_every_failing_item(
    cli: Cli, fresh_fleet: SimFleet, tiny_workload: Path, tmp_path: Path
) -> None:
    """Outside the domain, caching on per metrics and per launch record: exit 2, all listed."""
    store = write_profiles(fresh_fleet.fleet_path, [2048, 4096, 8192], [2048, 8192])
    fresh_fleet.set_faults("e0", prefix_caching=True)
    record = tmp_path / "launch-e0.txt"
    record.write_text("vllm serve sim/tiny --max-model-len 32768\n")
    proc = _check(cli, fresh_fleet, tiny_workload, store, record)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    failing = [line for line in proc.stdout.splitlines() if line.startswith("FAIL")]
    assert len(failing) == 4, proc.stdout
    text = "\n".join(failing)
    assert "prefill domain" in text and "decode domain" in text
    assert "enable_prefix_caching=True" in text
    assert "launch-e0.txt" in text and "--no-enable-prefix-caching" in text
