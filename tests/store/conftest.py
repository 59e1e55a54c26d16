"""Builders shared by the narwhal-store tests: a small fleet and matching store/sidecar pairs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest

from narwhal_store import (
    PENDING_SHA256,
    Generator,
    LoadedFleet,
    Profile,
    ProfileKey,
    ProfileSamples,
    ProfileStore,
    SamplesSidecar,
    canonical_json,
    load_fleet,
    new_documents,
    profile_key,
    sha256_hex,
)

FLEET_DOC: dict[str, Any] = {
    "format": "narwhal.fleet",
    "format_version": 1,
    "profiles": {"path": "profiles/fleet-profiles.json"},
    "engines": [
        {
            "iid": "h200-0.prefill",
            "url": "http://127.0.0.1:8101",
            "role": "prefill",
            "model": "llama-3.1-8b",
            "shared_device": {"group": "h200-0"},
            "engine_contract": {
                "model": "llama-3.1-8b",
                "max_model_len": 16384,
                "version": "0.11.0",
                "prefix_caching": False,
            },
            "api_key_env": "NARWHAL_ENGINE_KEY",
        },
        {
            "iid": "h200-0.decode",
            "url": "http://127.0.0.1:8102",
            "role": "decode",
            "shared_device": {"group": "h200-0"},
        },
        {"iid": "solo", "url": "https://engine.example:8443/base", "role": "mixed"},
    ],
}

PairFactory = Callable[..., tuple[ProfileStore, SamplesSidecar]]


@pytest.fixture
def fleet_doc() -> dict[str, Any]:
    """A fresh deep copy of the three-engine fleet document, free to mutate."""
    doc: dict[str, Any] = orjson.loads(orjson.dumps(FLEET_DOC))
    return doc


@pytest.fixture
def fleet_file(tmp_path: Path) -> Path:
    """The three-engine fleet written to tmp_path/fleet.json."""
    path = tmp_path / "fleet.json"
    path.write_bytes(orjson.dumps(FLEET_DOC))
    return path


@pytest.fixture
def fleet(fleet_file: Path) -> LoadedFleet:
    """The loaded three-engine fleet."""
    return load_fleet(fleet_file)


def _identity(iid: str, start: float) -> dict[str, Any]:
    return {
        "url": f"http://127.0.0.1/{iid}",
        "model": "llama-3.1-8b",
        "root": "meta-llama/Llama-3.1-8B",
        "max_model_len": 16384,
        "version": "0.11.0",
        "process_start_time_seconds": start,
    }


def _entry(key: ProfileKey, evidence: dict[str, Any], seed: int) -> dict[str, Any]:
    lengths = [256, 1024, 4096]
    return {
        "key": key.model_dump(mode="json"),
        "evidence": {"before": evidence, "after": evidence},
        "settings": {
            "prefill_lens": lengths,
            "decode_input_lens": [512, 4096],
            "decode_concurrency": [1, 4],
            "decode_tokens": 8,
            "prefill_repeats": 3,
            "decode_repeats": 1,
            "limits_applied": {"max_num_seqs": 32},
            "prompt_seed": seed,
        },
        "prefill_samples": [
            {
                "length": n,
                "ttft_s": [0.01 + n * 1e-5, 0.011 + n * 1e-5, 0.0105 + n * 1e-5],
                "request_ids": [f"p-{n}-{r}" for r in range(3)],
            }
            for n in lengths
        ],
        "decode_samples": [
            {
                "input_len": 512,
                "concurrency": 1,
                "repeat": 0,
                "valid": True,
                "streams": [
                    {
                        "request_id": "d-0",
                        "send_ns": 1_000,
                        "chunk_ns": [2_000, 3_000, 4_000],
                        "chunk_tokens": [1, 2, 1],
                    }
                ],
                "tpot_s": 0.0123,
                "ctx": 514.5,
            },
            {
                "input_len": 4096,
                "concurrency": 4,
                "repeat": 0,
                "valid": False,
                "reason": "waiting requests during the cohort",
                "streams": [],
            },
        ],
        "neighbours": [],
        "decode_fit": {
            "form": "tpot-batch-context-v1",
            "coefficients": {"d0": 0.01, "d1": 0.0005, "d2": 1e-8},
            "domain": {"concurrency": [1, 4], "ctx": [514.5, 4100.0]},
            "mean_rel_error": 0.02,
            "worst_rel_error": 0.05,
        },
    }


def _profile(key: ProfileKey, evidence_sha: str, iid: str) -> dict[str, Any]:
    return {
        "key": key.model_dump(mode="json"),
        "binding": {"kind": "identity", "generation": evidence_sha, "sha256": evidence_sha},
        "engine": {
            "url": f"http://127.0.0.1/{iid}",
            "model": "llama-3.1-8b",
            "root": "meta-llama/Llama-3.1-8B",
            "max_model_len": 16384,
            "version": "0.11.0",
        },
        "prefill_fit": {
            "form": "ttft-quadratic-v1",
            "coefficients": {"a": 0.01, "b": 1e-5, "c": 1e-10},
            "domain": {"min_len": 256, "max_len": 4096, "lengths": [256, 1024, 4096]},
            "residuals": [{"x": [256], "observed": 0.0126, "predicted": 0.0125, "rel_error": 0.01}],
            "mean_rel_error": 0.01,
            "worst_rel_error": 0.02,
            "worst_point": [256],
        },
        "decode_fit": {
            "form": "tpot-batch-context-v1",
            "coefficients": {"d0": 0.01, "d1": 0.0005, "d2": 1e-8},
            "domain": {"concurrency": [1, 4], "ctx": [514.5, 4100.0]},
        },
        "colocation": None,
        "samples_sha256": PENDING_SHA256,
    }


@pytest.fixture
def make_pair(fleet: LoadedFleet) -> PairFactory:
    """Factory: a matching (store, sidecar) for some fleet engines (keys from the fleet)."""

    def build(
        iids: Sequence[str] | None = None,
        *,
        keys: Sequence[ProfileKey] | None = None,
        start: float = 1_700_000_000.5,
    ) -> tuple[ProfileStore, SamplesSidecar]:
        if keys is None:
            chosen = list(iids) if iids is not None else fleet.config.iids()
            keys = [profile_key(fleet, iid) for iid in chosen]
        profiles: list[Profile] = []
        entries: list[ProfileSamples] = []
        for seed, key in enumerate(keys):
            evidence = _identity(key.engine, start)
            evidence_sha = sha256_hex(canonical_json(evidence))
            profiles.append(Profile.model_validate(_profile(key, evidence_sha, key.engine)))
            entries.append(ProfileSamples.model_validate(_entry(key, evidence, seed)))
        return new_documents(
            mode="live",
            fleet_sha256=fleet.sha256,
            generator=Generator(name="narwhal-profile", version="0.1.0"),
            profiles=profiles,
            samples=entries,
            created_at="2026-11-30T05:00:00+00:00",
        )

    return build
