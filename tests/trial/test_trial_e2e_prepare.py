"""End-to-end ``prepare``: the served model's seed completion becomes workload/workload.json."""

from __future__ import annotations

import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import orjson
import pytest

from narwhal_sim.testing import SimFleet
from narwhal_trial import Workload, load_workload

from .conftest import LAUNCHER, NO_JITTER, Cli, JsonHandler, serve, tiny_fleet

pytestmark = pytest.mark.slow

FALLBACK_IDS = list(range(500, 532))


def test_prepare_writes_the_workload(cli: Cli, shared_fleet: SimFleet, tmp_path: Path) -> None:
    """The runbook's prepare line: exit 0, a private canonical workload with 32 returned ids."""
    out = tmp_path / "workload"
    proc = cli("prepare", "--base", str(shared_fleet.router_url), "--input-tokens", "8192",
               "--output-tokens", "128", "--seed", "1729", "--out", str(out))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    workload = load_workload(out / "workload.json").workload
    assert workload.model == "sim/tiny" and workload.max_model_len == 32768
    assert len(workload.pool) == 32 and workload.seed_prompt.token_ids_source == "return_token_ids"
    assert (workload.input_tokens, workload.output_tokens, workload.seed) == (8192, 128, 1729)
    s = workload.sampling
    assert (s.temperature, s.add_special_tokens, s.ignore_eos) == (0.0, False, True)
    assert s.min_tokens == s.max_tokens == 128
    assert stat.S_IMODE(out.stat().st_mode) == 0o700
    assert stat.S_IMODE((out / "workload.json").stat().st_mode) == 0o600
    again = cli("prepare", "--base", str(shared_fleet.router_url), "--input-tokens", "8192",
                "--output-tokens", "128", "--seed", "1729", "--out", str(out))  # fmt: skip
    assert again.returncode == 1 and "already holds workload.json" in again.stderr


def test_prepare_refuses_a_shape_beyond_the_context_limit(
    cli: Cli, shared_fleet: SimFleet, tmp_path: Path
) -> None:
    """Input + output above the live max_model_len is a blocking error; nothing is written."""
    out = tmp_path / "workload"
    proc = cli("prepare", "--base", str(shared_fleet.router_url), "--input-tokens", "32768",
               "--output-tokens", "128", "--seed", "1", "--out", str(out))  # fmt: skip
    assert proc.returncode == 1
    assert "max_model_len 32768" in proc.stderr
    assert not out.exists()


class _OldEngine(JsonHandler):
    """An engine that ignores return_token_ids but honours return_tokens_as_token_ids."""

    bodies: ClassVar[list[dict[str, Any]]] = []

    def do_GET(self) -> None:
        """/v1/models and /version."""
        if self.path == "/v1/models":
            self.send_json(
                {"object": "list", "data": [{"id": "old", "root": "old", "max_model_len": 16384}]}
            )
        else:
            self.send_json({"version": "0.10.1"})

    def do_POST(self) -> None:
        """/tokenize and /v1/completions (non-streaming)."""
        body = orjson.loads(self.rfile.read(int(self.headers["content-length"])))
        if self.path == "/tokenize":
            self.send_json({"count": 1, "max_model_len": 16384, "tokens": [1]})
            return
        self.bodies.append(body)
        choice: dict[str, Any] = {"index": 0, "text": "x" * 32, "finish_reason": "length"}
        if body.get("logprobs") is not None and body.get("return_tokens_as_token_ids"):
            choice["logprobs"] = {"tokens": [f"token_id:{t}" for t in FALLBACK_IDS]}
        self.send_json({"id": "cmpl-1", "object": "text_completion", "choices": [choice]})


@pytest.fixture
def old_engine() -> Iterator[str]:
    """A loopback engine without return_token_ids, served from a thread."""
    _OldEngine.bodies = []
    with serve(_OldEngine) as url:
        yield url


def test_prepare_falls_back_to_logprobs_token_ids(
    cli: Cli, old_engine: str, tmp_path: Path
) -> None:
    """Without token_ids in the answer, prepare asks for logprobs with token-id placeholders."""
    out = tmp_path / "workload"
    proc = cli("prepare", "--base", old_engine, "--input-tokens", "1024",
               "--output-tokens", "16", "--seed", "7", "--out", str(out))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    workload = Workload.model_validate_json((out / "workload.json").read_bytes())
    assert workload.pool == FALLBACK_IDS
    assert workload.seed_prompt.token_ids_source == "logprobs"
    first, second = _OldEngine.bodies
    assert first["return_token_ids"] is True and first["max_tokens"] == 32
    assert second["logprobs"] == 1 and second["return_tokens_as_token_ids"] is True
    assert first["prompt"] == second["prompt"] and first["temperature"] == 0


def test_base_defaults_to_the_environment(
    shared_fleet: SimFleet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--base may be left out when NARWHAL_TRIAL_URL is exported, as the runbook does."""
    monkeypatch.setenv("NARWHAL_TRIAL_URL", str(shared_fleet.router_url))
    out = tmp_path / "workload"
    proc = subprocess.run(
        [sys.executable, str(LAUNCHER), "prepare", "--input-tokens", "64", "--output-tokens", "8",
         "--seed", "3", "--out", str(out)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert (out / "workload.json").is_file()


def test_prepare_falls_back_on_a_simulated_engine_older_than_0_10_2(
    cli: Cli, tmp_path: Path
) -> None:
    """Through the sim router to a 0.10.1 engine (no return_token_ids): the logprobs fallback."""
    cfg = {**NO_JITTER, "engines": {"e0": {"version": "0.10.1"}}}
    with tiny_fleet(tmp_path / "fleet", sim_config=cfg) as fleet:
        out = tmp_path / "workload"
        proc = cli("prepare", "--base", str(fleet.router_url), "--input-tokens", "1024",
                   "--output-tokens", "16", "--seed", "7", "--out", str(out))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    workload = load_workload(out / "workload.json").workload
    assert workload.seed_prompt.token_ids_source == "logprobs"
    assert len(workload.pool) == 32
    assert all(isinstance(t, int) and t >= 0 for t in workload.pool)
