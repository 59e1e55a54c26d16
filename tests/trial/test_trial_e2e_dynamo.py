"""The trial through a frontend that answers as NVIDIA Dynamo 1.6.1's (``--router-mimic dynamo``):
no /tokenize, no token ids or logprobs, no context limit (its mocker's), a 400 for
``add_special_tokens`` and ``return_token_ids``, and its own drain and scheduler gauges."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import orjson
import pytest

from narwhal_sim import write_model_folder
from narwhal_sim.testing import SimFleet
from narwhal_trial import load_workload

from ._store_kit import write_profiles
from .conftest import (
    Cli,
    JsonHandler,
    journal_ids,
    prepare_workload,
    read_run,
    run_args,
    serve,
    tiny_fleet,
)

pytestmark = pytest.mark.slow
LIMIT = "32768"


@pytest.fixture(scope="module")
def dynamo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimFleet]:
    """A tiny engine behind a Dynamo-mimicking frontend that reports context length 0."""
    options = ["--router-mimic", "dynamo"]
    with tiny_fleet(tmp_path_factory.mktemp("dynamo"), router_options=options) as fleet:
        yield fleet


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The simulator's model folder (its tokenizer.json), as the frontend's workers load it."""
    folder = tmp_path_factory.mktemp("model")
    write_model_folder(folder)
    return folder


def _prepare(base: str, out: Path, *extra: str) -> tuple[str, ...]:
    return ("prepare", "--base", base, "--input-tokens", "1024", "--output-tokens", "32",
            "--seed", "1729", "--out", str(out), *extra)  # fmt: skip


@pytest.fixture(scope="module")
def frontend_workload(dynamo: SimFleet, model_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    """A workload prepared through the frontend with --tokenizer and --max-model-len."""
    return prepare_workload(
        str(dynamo.router_url),
        tmp_path_factory.mktemp("dyn-workload"),
        "--tokenizer",
        str(model_dir),
        "--max-model-len",
        LIMIT,
    )


def test_prepare_through_the_frontend_needs_a_tokenizer_and_a_limit(
    cli: Cli, dynamo: SimFleet, model_dir: Path, tmp_path: Path
) -> None:
    """Without --tokenizer: exit 1 naming it (no token ids, no logprobs, /tokenize 404); without a
    limit (the gauge reads 0): exit 1 naming --max-model-len. Nothing is written either way."""
    out = tmp_path / "w"
    base = str(dynamo.router_url)
    no_tokenizer = cli(*_prepare(base, out, "--max-model-len", LIMIT))
    assert no_tokenizer.returncode == 1
    assert "return_token_ids (refused: HTTP 400" in no_tokenizer.stderr
    assert "Pass --tokenizer DIR" in no_tokenizer.stderr
    no_limit = cli(*_prepare(base, out, "--tokenizer", str(model_dir)))
    assert no_limit.returncode == 1
    assert "pass --max-model-len N" in no_limit.stderr
    missing = cli(*_prepare(base, out, "--tokenizer", str(tmp_path / "nope"), "--max-model-len",
                            LIMIT))  # fmt: skip
    assert missing.returncode == 1 and f"--tokenizer {tmp_path / 'nope'}" in missing.stderr
    assert not out.exists()


def test_the_tokenizer_pool_is_the_engines_own_ids(
    dynamo: SimFleet, model_dir: Path, frontend_workload: Path, tmp_path: Path
) -> None:
    """The served text re-tokenized locally gives exactly the ids the engine itself returns
    (return_token_ids, prepared at the engine), and the workload says how it was made."""
    at_engine = load_workload(prepare_workload(dynamo.urls["e0"], tmp_path)).workload
    through = load_workload(frontend_workload).workload
    assert through.pool == at_engine.pool and len(through.pool) == 32
    assert through.seed_prompt.token_ids_source == "tokenizer"
    assert at_engine.seed_prompt.token_ids_source == "return_token_ids"
    assert through.tokenizer is not None
    tokenizer_json = (model_dir / "tokenizer.json").read_bytes()
    assert through.tokenizer.sha256 == hashlib.sha256(tokenizer_json).hexdigest()
    assert (through.max_model_len, through.max_model_len_source) == (32768, "option")


def test_run_through_the_frontend_omits_what_it_refuses_and_counts_by_usage(
    cli: Cli, dynamo: SimFleet, frontend_workload: Path, tmp_path: Path
) -> None:
    """The probe is refused once (both fields named), then accepted without them; every request
    then streams 32 one-token chunks counted by the usage, the drain reads Dynamo's gauges, and
    the manifest keeps the omitted fields, the probes and the frontend's scheduler settings."""
    out = tmp_path / "run"
    ran = cli(*run_args(str(dynamo.router_url), frontend_workload, out, requests=6,
                        max_model_len=LIMIT, drain_preset="dynamo"))  # fmt: skip
    assert ran.returncode == 0, ran.stdout + ran.stderr
    said = "refuses add_special_tokens, return_token_ids: left out of every request (tokens "
    assert said + "counted by usage; manifest.json request_fields)" in ran.stderr
    manifest, records, summary = read_run(out)
    fields = manifest["request_fields"]
    assert manifest["server_version"] is None  # Dynamo's frontend has no /version
    assert [o["field"] for o in fields["omitted"]] == ["add_special_tokens", "return_token_ids"]
    assert all("no effect" in o["reason"] or "usage" in o["reason"] for o in fields["omitted"])
    assert fields["token_counting"] == "usage"
    probes = fields["probes"]
    assert [(p["outcome"], p["http_status"], p["omitted"]) for p in probes] == [
        ("refused", 400, []),
        ("accepted", 200, ["add_special_tokens", "return_token_ids"]),
    ]
    assert "Unsupported parameter(s)" in probes[0]["detail"]
    warmup = manifest["warmup_request_id"]
    assert [p["request_id"] for p in probes] == [f"{warmup}-probe-0", f"{warmup}-probe-1"]
    scheduler = manifest["frontend_scheduler"]
    # the simulated engine's own settings, as the frontend publishes its workers'
    assert (scheduler["max_num_seqs"], scheduler["max_num_batched_tokens"]) == (1024, 8192)
    assert scheduler["context_length"] is None  # the gauge reads 0: not published
    assert manifest["limits"]["drain_gauges"] == [
        "dynamo_frontend_queued_requests",
        "dynamo_frontend_inflight_requests",
    ]
    assert len(summary["drain_s"]) == 2 and summary["warmup_status"] == "completed"
    assert len(records) == 6
    for record in records:
        assert record["status"] == "completed" and record["good"], record
        # one token per chunk, the closing empty chunk not counted: chunks == the usage count
        assert (record["completion_tokens"], record["chunks"]) == (32, 32)
        assert record["tpot_s"] is not None and record["tpot_s"] > 0
    # every request reached the frontend once: the run's, the warm-up and both probes
    ids = [i for i in journal_ids(dynamo) if i.startswith(manifest["run_id"])]
    probe_ids = [p["request_id"] for p in probes]
    assert sorted(ids) == sorted([r["request_id"] for r in records] + [warmup, *probe_ids])


def test_the_frontends_context_gauge_gives_the_limit(
    cli: Cli, model_dir: Path, tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    """A frontend whose workers report a context length: prepare reads it from the gauge, and a
    --max-model-len that disagrees with it is an error naming the gauge."""
    options = ["--router-mimic", "dynamo", "--router-context-length", "16384"]
    with tiny_fleet(tmp_path_factory.mktemp("dyn-ctx"), router_options=options) as fleet:
        base = str(fleet.router_url)
        workload = prepare_workload(base, tmp_path, "--tokenizer", str(model_dir))
        done = load_workload(workload).workload
        assert (done.max_model_len, done.max_model_len_source) == (16384, "metrics")
        out = tmp_path / "other"
        wrong = cli(*_prepare(base, out, "--tokenizer", str(model_dir), "--max-model-len", LIMIT))
        assert wrong.returncode == 1 and not out.exists()
        assert "--max-model-len 32768 disagrees with the max_model_len 16384" in wrong.stderr
        assert "dynamo_frontend_model_context_length" in wrong.stderr


class _Strict(JsonHandler):
    """A server that refuses one of the runbook's sampling fields (``refused``)."""

    refused: ClassVar[str] = "min_tokens"

    def do_GET(self) -> None:
        if self.path == "/v1/models":
            self.send_json({"object": "list", "data": [
                {"id": "sim/tiny", "object": "model", "max_model_len": 32768}]})  # fmt: skip
        else:
            self.send_json({"detail": "Not Found"}, 404)

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length", "0"))
        body = orjson.loads(self.rfile.read(length))
        if self.refused in body:
            message = f"Validation: Unsupported parameter(s): `{self.refused}`"
            self.send_json({"message": message, "type": "Bad Request", "code": 400}, 400)
        else:
            self.send_json({"detail": "unexpected"}, 500)


@pytest.mark.parametrize(
    ("refused", "said"),
    [
        ("min_tokens", "refuses the runbook's sampling field(s) min_tokens"),
        ("ignore_eos", "refuses the runbook's sampling field(s) ignore_eos"),
        ("temperature", "refuses the runbook's sampling field(s) temperature"),
        ("stream_options", "refuses stream_options"),
        ("model", "refuses the trial's request (probe "),
    ],
)
def test_a_server_that_refuses_what_the_trial_needs_is_a_blocking_error(
    cli: Cli, tiny_workload: Path, tmp_path: Path, refused: str, said: str
) -> None:
    """A sampling field, the usage options, or a field the trial cannot leave out refused: the
    run stops at its probe, exit 1 naming it; no request of the run is offered, and the
    manifest's request fields stay undecided."""
    handler = type("Refusing", (_Strict,), {"refused": refused})
    with serve(handler) as url:
        out = tmp_path / "run"
        ran = cli(*run_args(url, tiny_workload, out, requests=3, drain_preset="none"))
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert said in ran.stderr, ran.stderr
    assert f"Unsupported parameter(s): `{refused}`" in ran.stderr
    manifest, records, summary = read_run(out)
    assert records == [] and summary["error"] is not None
    assert manifest["request_fields"] is None  # the probe did not decide the fields


def _through_frontend(fleet: SimFleet, folder: Path) -> Path:
    """The fleet file with engine e0 reached through the frontend (its workers serve no HTTP)."""
    doc = orjson.loads(fleet.fleet_path.read_bytes())
    for engine in doc["engines"]:
        engine["url"] = str(fleet.router_url)
    path = folder / "fleet-frontend.json"
    path.write_bytes(orjson.dumps(doc))
    return path


@pytest.mark.parametrize(("seqs", "ok"), [(1024, True), (256, False)])
def test_check_through_the_frontend_reads_its_scheduler_settings(
    cli: Cli, dynamo: SimFleet, frontend_workload: Path, tmp_path: Path, seqs: int, ok: bool
) -> None:
    """Through the frontend: the context limit is the operator's, prefix caching is left to the
    launch records (the page has no cache config), and the published scheduler settings must be
    the profile's: max_num_seqs 1024 passes, a profile measured at 256 fails, both shown."""
    fleet = _through_frontend(dynamo, tmp_path)
    scheduler = {
        "max_num_batched_tokens": {"value": 8192, "source": "engine"},
        "max_num_seqs": {"value": seqs, "source": "limits"},
        "chunked_prefill": {"value": None, "source": "unknown"},
    }
    store = write_profiles(fleet, [256, 1024, 4096], [512, 2048],
                           profile_extra={"scheduler": scheduler})  # fmt: skip
    record = tmp_path / "launch-e0.txt"
    record.write_text("python -m dynamo.vllm --model sim/tiny --no-enable-prefix-caching\n")
    proc = cli("check", "--workload", str(frontend_workload), "--fleet", str(fleet),
               "--profiles", str(store), "--launch-record", str(record),
               "--max-model-len", LIMIT)  # fmt: skip
    assert proc.returncode == (0 if ok else 2), proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert "ok   e0: context limit: 1056 tokens, max_model_len 32768" in lines
    assert any(
        line.startswith("ok   e0: prefix caching off (metrics): a Dynamo frontend's page")
        for line in lines
    ), proc.stdout
    shown = "e0: scheduler settings (frontend): max_num_seqs 1024, max_num_batched_tokens 8192"
    if ok:
        assert f"ok   {shown}, as in the profile" in lines
        assert not [line for line in lines if line.startswith("FAIL")]
    else:
        assert (
            f"FAIL {shown}; differs from the profile: max_num_seqs 1024 here, 256 in the profile"
            in lines
        )


def test_predict_reads_the_frontends_settings_and_warns_of_a_difference(
    cli: Cli, dynamo: SimFleet, tmp_path: Path
) -> None:
    """--frontend: the published max_num_seqs (1024) and budget (8192) rank over a profile
    measured at 256 and 4096, with their source named and the difference warned about; a server
    that publishes none is an error naming it, and nothing is written."""
    fleet = _through_frontend(dynamo, tmp_path)
    scheduler = {
        "max_num_batched_tokens": {"value": 4096, "source": "engine"},
        "max_num_seqs": {"value": 256, "source": "limits"},
        "chunked_prefill": {"value": None, "source": "unknown"},
    }
    store = write_profiles(fleet, [256, 1024, 4096], [512, 2048],
                           profile_extra={"scheduler": scheduler})  # fmt: skip
    args = ["predict", "--fleet", str(fleet), "--profiles", str(store), "--input-tokens", "1024",
            "--output-tokens", "32", "--requests", "20", "--ttft", "2", "--tpot", "0.0333",
            "--attainment", "0.95", "--rate", "1", "--replications", "1"]  # fmt: skip
    text = cli(*args, "--frontend", str(dynamo.router_url))
    assert text.returncode == 0, text.stdout + text.stderr
    assert "WARNING e0: max_num_seqs 1024 here, 256 in the profile" in text.stdout
    assert "WARNING e0: max_num_batched_tokens 8192 here, 4096 in the profile" in text.stdout
    out = tmp_path / "prediction.json"
    done = cli(*args, "--frontend", str(dynamo.router_url), "--out", str(out))
    assert done.returncode == 0, done.stderr
    inputs = orjson.loads(out.read_bytes())["inputs"]
    engine = inputs["engines"]["e0"]
    assert (engine["max_num_seqs"], engine["max_num_batched_tokens"]) == (1024, 8192)
    assert engine["max_num_seqs_source"].startswith(f"frontend, {dynamo.router_url}/metrics")
    assert inputs["frontend"] == str(dynamo.router_url)
    plain = cli(*args, "--frontend", dynamo.urls["e0"], "--out", str(tmp_path / "no.json"))
    assert plain.returncode == 1
    assert f"--frontend {dynamo.urls['e0']}: " in plain.stderr
    assert "publishes no scheduler settings for e0's model" in plain.stderr
    assert not (tmp_path / "no.json").exists()


def test_the_documents_token_counting_is_the_engine_clients() -> None:
    """The manifest spells the engine client's TokenCounting itself (to stay offline): equal."""
    from typing import get_args

    from narwhal_engine_client import TokenCounting
    from narwhal_trial.documents._request_fields import TokenCounting as Spelled

    assert get_args(Spelled) == get_args(TokenCounting)
