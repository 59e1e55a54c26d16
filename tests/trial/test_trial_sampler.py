"""Unit tests of the workload file and the deterministic per-request sampler."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import orjson
import pytest

from narwhal_trial import (
    Workload,
    WorkloadError,
    load_workload,
    prompt_ids,
    request_body,
    workload_bytes,
)
from narwhal_trial.workload._file import Sampling, SeedPrompt


def _workload(**changes: object) -> Workload:
    base: dict[str, object] = {
        "model": "m",
        "max_model_len": 16384,
        "engine_version": "0.33.0",
        "pool": list(range(100, 132)),
        "input_tokens": 8192,
        "output_tokens": 128,
        "seed": 1729,
        "sampling": Sampling(min_tokens=128, max_tokens=128),
        "seed_prompt": SeedPrompt(
            name="x", sha256="0" * 64, completion_tokens=32, token_ids_source="return_token_ids"
        ),
        "created": "2026-11-30T00:00:00+00:00",
    }
    base.update(changes)
    return Workload.model_validate(base)


def test_prompt_is_the_documented_draw() -> None:
    """Request n's prompt is pool[default_rng(seed + n).integers(0, len(pool), input_tokens)]."""
    w = _workload()
    pool = np.asarray(w.pool)
    for n in (0, 1, 199):
        expected = pool[np.random.default_rng(1729 + n).integers(0, 32, size=8192)]
        assert np.array_equal(prompt_ids(w, n), expected)


def test_prompts_are_deterministic_and_distinct() -> None:
    """The same n gives the same ids every time; different n give different prompts."""
    w = _workload()
    assert np.array_equal(prompt_ids(w, 7), prompt_ids(w, 7))
    assert not np.array_equal(prompt_ids(w, 7), prompt_ids(w, 8))
    ids = prompt_ids(w, 3)
    assert len(ids) == 8192 and set(ids.tolist()) <= set(w.pool)


def test_request_body_carries_the_runbook_settings() -> None:
    """Every body: exact prompt, temperature 0, no special tokens, min = max = 128, ignore_eos."""
    w = _workload()
    body = orjson.loads(request_body(w, 5))
    assert body["prompt"] == prompt_ids(w, 5).tolist()
    assert body["temperature"] == 0
    assert body["add_special_tokens"] is False
    assert body["min_tokens"] == body["max_tokens"] == 128
    assert body["ignore_eos"] is True
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["model"] == "m"


def test_workload_file_round_trip_and_digest(tmp_path: Path) -> None:
    """The file is canonical JSON; its digest is the SHA-256 of its bytes."""
    path = tmp_path / "workload.json"
    data = workload_bytes(_workload())
    path.write_bytes(data)
    loaded = load_workload(path)
    assert loaded.workload == _workload()
    assert loaded.sha256 == hashlib.sha256(data).hexdigest()
    assert data == orjson.dumps(orjson.loads(data), option=orjson.OPT_SORT_KEYS)


def test_workload_rejects_unknown_keys_and_bad_settings(tmp_path: Path) -> None:
    """Unknown keys and min/max tokens that differ from output_tokens are refused."""
    doc = orjson.loads(workload_bytes(_workload()))
    path = tmp_path / "w.json"
    path.write_bytes(orjson.dumps({**doc, "extra": 1}))
    with pytest.raises(WorkloadError, match="extra"):
        load_workload(path)
    doc["sampling"]["max_tokens"] = 64
    path.write_bytes(orjson.dumps(doc))
    with pytest.raises(WorkloadError, match="min_tokens and max_tokens"):
        load_workload(path)
    with pytest.raises(WorkloadError, match="cannot read"):
        load_workload(tmp_path / "missing.json")
