"""Routers that are not ours: no context limit, no /tokenize, no metrics page, no token ids."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import orjson
import pytest

from narwhal_sim import encode
from narwhal_sim.testing import SimFleet
from narwhal_trial import load_workload

from .conftest import Cli, JsonHandler, prepare_workload, read_run, run_args, serve, tiny_fleet

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def foreign(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimFleet]:
    """A tiny engine behind a router without /tokenize, max_model_len or /metrics."""
    omit = [f"--router-omit={w}" for w in ("tokenize", "max-model-len", "metrics")]
    with tiny_fleet(tmp_path_factory.mktemp("foreign"), router_options=omit) as fleet:
        yield fleet


@pytest.fixture(scope="module")
def engine_workload(foreign: SimFleet, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """1024-in / 32-out, prepared against the engine (the documented recipe)."""
    return prepare_workload(foreign.urls["e0"], tmp_path_factory.mktemp("foreign-workload"))


def test_prepare_at_the_router_says_to_pass_the_limit_or_use_an_engine(
    cli: Cli, foreign: SimFleet, tmp_path: Path
) -> None:
    """No limit from the router: prepare exits 1, says --max-model-len or an engine will do, and
    writes nothing; with --max-model-len it prepares (the router passes return_token_ids through)
    and the workload says where its limit came from."""
    out = tmp_path / "workload"
    args = ("prepare", "--base", str(foreign.router_url), "--input-tokens", "1024",
            "--output-tokens", "32", "--seed", "1", "--out", str(out))  # fmt: skip
    proc = cli(*args)
    assert proc.returncode == 1
    assert f"no max_model_len from {foreign.router_url}/v1/models, /tokenize" in proc.stderr
    assert "pass --max-model-len N, or point the command at an engine" in proc.stderr
    assert not out.exists()
    done = cli(*args, "--max-model-len", "32768")
    assert done.returncode == 0, done.stderr
    workload = load_workload(out / "workload.json").workload
    assert (workload.max_model_len, workload.max_model_len_source) == (32768, "option")
    assert workload.seed_prompt.token_ids_source == "return_token_ids"
    assert workload.tokenizer is None


def test_run_at_the_router_needs_the_limit_and_a_drain_choice(
    cli: Cli, foreign: SimFleet, engine_workload: Path, tmp_path: Path
) -> None:
    """The router reports no limit: without --max-model-len run exits 1 saying what to pass;
    with it (and --drain-preset none, as the router has no metrics page) the run passes, and the
    manifest records the operator's limit, the preset and where the workload came from."""
    router = str(foreign.router_url)
    bare = cli(*run_args(router, engine_workload, tmp_path / "bare", requests=2))
    assert bare.returncode == 1
    assert "pass --max-model-len N, or point the command at an engine" in bare.stderr

    no_metrics = cli(*run_args(router, engine_workload, tmp_path / "drain", requests=2,
                               max_model_len=32768))  # fmt: skip
    assert no_metrics.returncode == 1
    assert f"cannot read {router}/metrics: HTTP 404" in no_metrics.stderr

    out = tmp_path / "ok"
    ran = cli(*run_args(router, engine_workload, out, requests=4, attainment=0.5,
                        max_model_len=32768, drain_preset="none"))  # fmt: skip
    assert ran.returncode == 0, ran.stdout + ran.stderr
    manifest, records, summary = read_run(out)
    assert manifest["operator_max_model_len"] == 32768
    assert manifest["arguments"]["max_model_len"] == 32768
    assert (manifest["limits"]["drain_preset"], manifest["limits"]["drain_gauges"]) == ("none", [])
    assert manifest["workload_served_by"] == foreign.urls["e0"] and manifest["base_url"] == router
    assert manifest["api_key_env"] is None
    assert summary["drain_s"] == [] and len(records) == 4


def test_max_model_len_that_disagrees_with_the_server_is_an_error(
    cli: Cli, foreign: SimFleet, engine_workload: Path, tmp_path: Path
) -> None:
    """The engine reports 32768: --max-model-len 4096 is a blocking error naming both values."""
    proc = cli(*run_args(foreign.urls["e0"], engine_workload, tmp_path / "o", requests=2,
                         max_model_len=4096, drain_preset="vllm"))  # fmt: skip
    assert proc.returncode == 1
    assert (
        f"--max-model-len 4096 disagrees with the max_model_len 32768 that {foreign.urls['e0']} "
        "reports"
    ) in proc.stderr
    manifest, _, _ = read_run(tmp_path / "o")
    assert manifest["limits"]["drain_gauges"] == [
        "vllm:num_requests_waiting",
        "vllm:num_requests_running",
    ]


def test_run_names_the_workloads_source_when_the_model_differs(
    cli: Cli, foreign: SimFleet, engine_workload: Path, tmp_path: Path
) -> None:
    """A router serving another model: exit 1 naming both models and where the workload came
    from."""
    doc = orjson.loads(engine_workload.read_bytes())
    other = tmp_path / "other.json"
    other.write_bytes(orjson.dumps(doc | {"model": "sim/other"}, option=orjson.OPT_SORT_KEYS))
    proc = cli(*run_args(str(foreign.router_url), other, tmp_path / "o", requests=2,
                         max_model_len=32768, drain_preset="none"))  # fmt: skip
    assert proc.returncode == 1
    assert "does not serve model 'sim/other' (served: sim/tiny)" in proc.stderr
    assert f"the workload was prepared from {foreign.urls['e0']} for 'sim/other'" in proc.stderr


class _BareFrontend(JsonHandler):
    """An OpenAI-style frontend: completions with text only (token_ids and logprobs fields are
    dropped); /tokenize answers 404 unless ``tokenize`` is set."""

    tokenize: ClassVar[bool] = False
    TEXT: ClassVar[str] = "alpha beta gamma delta"

    def do_GET(self) -> None:
        """/v1/models with a limit; nothing else."""
        if self.path == "/v1/models":
            self.send_json({"object": "list", "data": [{"id": "m", "max_model_len": 16384}]})
        else:
            self.send_json({"detail": "Not Found"}, 404)

    def do_POST(self) -> None:
        """/v1/completions (text only) and, when enabled, /tokenize."""
        body = orjson.loads(self.rfile.read(int(self.headers["content-length"])))
        if self.path == "/tokenize" and self.tokenize:
            ids = encode(body["prompt"])
            self.send_json({"count": len(ids), "max_model_len": 16384, "tokens": ids})
        elif self.path == "/v1/completions":
            choice = {"index": 0, "text": self.TEXT, "finish_reason": "length"}
            self.send_json({"id": "cmpl-1", "object": "text_completion", "choices": [choice]})
        else:
            self.send_json({"detail": "Not Found"}, 404)


@pytest.fixture
def bare() -> Iterator[str]:
    """A bare frontend on a loopback port, served from a thread."""
    with serve(_BareFrontend) as url:
        yield url
    _BareFrontend.tokenize = False


def test_prepare_lists_the_token_id_mechanisms_it_tried(
    cli: Cli, bare: str, tmp_path: Path
) -> None:
    """No token_ids, no logprobs, no /tokenize: exit 1 naming all three, --tokenizer and the
    engine recipe."""
    out = tmp_path / "workload"
    proc = cli("prepare", "--base", bare, "--input-tokens", "64", "--output-tokens", "8",
               "--seed", "1", "--out", str(out))  # fmt: skip
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1
    for said in (
        f"no token ids for the seed completion from {bare}; tried",
        "return_token_ids (no token_ids in the answer)",
        "logprobs with return_tokens_as_token_ids (no logprobs tokens in the answer)",
        "/tokenize of the completion text (HTTP 404: Not Found)",
        "Pass --tokenizer DIR (the folder of m's tokenizer.json), or prepare against an engine "
        "that serves m",
    ):
        assert said in proc.stderr
    assert not out.exists()


def test_prepare_falls_back_to_tokenize_of_the_completion_text(
    cli: Cli, bare: str, tmp_path: Path
) -> None:
    """A frontend with /tokenize: the pool is the token ids of the completion's text."""
    _BareFrontend.tokenize = True
    out = tmp_path / "workload"
    proc = cli("prepare", "--base", bare, "--input-tokens", "64", "--output-tokens", "8",
               "--seed", "1", "--out", str(out))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    workload = load_workload(out / "workload.json").workload
    assert workload.seed_prompt.token_ids_source == "tokenize"
    assert workload.pool == encode(_BareFrontend.TEXT) and workload.served_by == bare
