"""A trial behind keys: a keyed router guarding every route, a keyed engine, and no key written."""

from __future__ import annotations

import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from narwhal_sim.testing import SimFleet
from narwhal_trial import load_workload

from .conftest import Cli, prepare_workload, read_run, run_args, tiny_fleet
from .test_trial_e2e_check import write_profiles

pytestmark = pytest.mark.slow

ROUTER_KEY = f"rk-{secrets.token_hex(12)}"
ENGINE_KEY = f"ek-{secrets.token_hex(12)}"
KEYS = {"NARWHAL_API_KEY": ROUTER_KEY, "SIM_ENGINE_KEY": ENGINE_KEY}


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimFleet]:
    """One tiny engine that wants its own key, behind a router that wants another on every route
    (/metrics and /tokenize too, so the drain and the limit checks must send it)."""
    with tiny_fleet(
        tmp_path_factory.mktemp("keyed"),
        engine={"api_key_env": "SIM_ENGINE_KEY"},
        router_options=["--router-api-key-env", "SIM_ROUTER_KEY", "--router-auth-scope", "all"],
        env={"SIM_ROUTER_KEY": ROUTER_KEY, "SIM_ENGINE_KEY": ENGINE_KEY},
    ) as fleet:
        yield fleet


@pytest.fixture(scope="module")
def keyed_workload(keyed: SimFleet, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 1024-in / 32-out workload prepared against the keyed engine itself."""
    folder = tmp_path_factory.mktemp("keyed-workload")
    return prepare_workload(keyed.urls["e0"], folder, "--api-key-env", "SIM_ENGINE_KEY", env=KEYS)


def _no_key_in(texts: list[str], folders: list[Path]) -> int:
    """Assert neither key is in any text or any file under the folders; returns files read."""
    read = 0
    for text in texts:
        assert ROUTER_KEY not in text and ENGINE_KEY not in text
    for folder in folders:
        for path in folder.rglob("*"):
            if path.is_file() and not path.is_symlink():
                data = path.read_bytes()
                assert ROUTER_KEY.encode() not in data, path
                assert ENGINE_KEY.encode() not in data, path
                read += 1
    return read


def test_prepare_at_the_engine_then_check_run_and_reconcile_with_keys(
    cli: Cli, keyed: SimFleet, tmp_path: Path
) -> None:
    """The documented recipe behind keys, and a grep of everything it wrote and printed.

    prepare against the engine (--api-key-env names its variable), check against the fleet (each
    engine's api_key_env), run against the router (NARWHAL_API_KEY, the default), reconcile.
    """
    trial = tmp_path / "trial"
    trial.mkdir()
    engine, router = keyed.urls["e0"], str(keyed.router_url)
    outputs: list[str] = []

    def step(*args: str) -> subprocess.CompletedProcess[str]:
        proc = cli(*args, env=KEYS)
        outputs.extend([proc.stdout, proc.stderr])
        return proc

    prepared = step("prepare", "--base", engine, "--api-key-env", "SIM_ENGINE_KEY",
                    "--input-tokens", "1024", "--output-tokens", "32", "--seed", "1729",
                    "--out", str(trial / "workload"))  # fmt: skip
    assert prepared.returncode == 0, prepared.stderr
    workload_path = trial / "workload" / "workload.json"
    workload = load_workload(workload_path).workload
    assert workload.served_by == engine and workload.model == "sim/tiny"

    store = write_profiles(keyed.fleet_path, [256, 1024, 4096], [512, 2048])
    record = trial / "launch-e0.txt"
    record.write_text("vllm serve sim/tiny --no-enable-prefix-caching\n")
    checked = step("check", "--workload", str(workload_path), "--fleet", str(keyed.fleet_path),
                   "--profiles", str(store), "--launch-record", str(record))  # fmt: skip
    assert checked.returncode == 0, checked.stdout + checked.stderr

    out = trial / "rate-20"
    ran = step(*run_args(router, workload_path, out, requests=6, attainment=0.5))
    assert ran.returncode == 0, ran.stdout + ran.stderr
    manifest, records, summary = read_run(out)
    assert manifest["base_url"] == router and manifest["workload_served_by"] == engine
    assert (
        manifest["api_key_env"] == "NARWHAL_API_KEY"
        and manifest["arguments"]["api_key_env"] is None
    )
    assert len(summary["drain_s"]) == 2  # the /metrics polls carried the key
    assert [r["status"] for r in records] == ["completed"] * 6

    assert keyed.journal_path is not None
    rec = step("reconcile", "--requests", str(out / "requests.jsonl"),
               "--journal", str(keyed.journal_path))  # fmt: skip
    assert rec.returncode == 0, rec.stdout

    assert _no_key_in(outputs, [trial, keyed.workdir]) >= 7  # workload, record, store x2, run x3


def test_keyless_commands_say_the_server_wants_a_key(
    cli: Cli, keyed: SimFleet, keyed_workload: Path, tmp_path: Path
) -> None:
    """Without a key, prepare and run exit 1 with one line naming the URL and the variable read;
    with the wrong key, the variable whose key was refused. prepare writes nothing."""
    router = str(keyed.router_url)
    wanted = (
        f"load_trial.py: error: HTTP 401 from {router}/v1/models: the server wants an API key; "
        "NARWHAL_API_KEY is not set (use --api-key-env NAME)\n"
    )
    out = tmp_path / "workload"
    prepared = cli("prepare", "--base", router, "--input-tokens", "64", "--output-tokens", "8",
                   "--seed", "1", "--out", str(out))  # fmt: skip
    assert (prepared.returncode, prepared.stderr) == (1, wanted)
    assert not out.exists()

    ran = cli(*run_args(router, keyed_workload, tmp_path / "run", requests=2))
    assert (ran.returncode, ran.stderr) == (1, wanted)
    _, records, summary = read_run(tmp_path / "run")
    assert records == [] and summary["error"] == wanted.removeprefix("load_trial.py: error: ")[:-1]

    wrong = cli(*run_args(router, keyed_workload, tmp_path / "wrong", requests=2,
                          api_key_env="SIM_ENGINE_KEY"), env=KEYS)  # fmt: skip
    assert wrong.returncode == 1
    assert wrong.stderr == (
        f"load_trial.py: error: HTTP 401 from {router}/v1/models: the server wants an API key; "
        "the key in SIM_ENGINE_KEY was refused\n"
    )
    _no_key_in([wrong.stdout, wrong.stderr], [tmp_path])


def test_check_sends_api_key_env_to_engines_without_their_own(
    cli: Cli, keyed: SimFleet, keyed_workload: Path, tmp_path: Path
) -> None:
    """An engine whose fleet entry names no api_key_env gets the --api-key-env key; without one,
    its live items fail with the 401 message, and the profile items are still checked."""
    doc = orjson.loads(keyed.fleet_path.read_bytes())
    del doc["engines"][0]["api_key_env"]
    fleet = tmp_path / "fleet.json"
    fleet.write_bytes(orjson.dumps(doc))
    store = write_profiles(fleet, [256, 1024, 4096], [512, 2048])
    record = tmp_path / "launch-e0.txt"
    record.write_text("vllm serve sim/tiny --no-enable-prefix-caching\n")
    args = ("check", "--workload", str(keyed_workload), "--fleet", str(fleet),
            "--profiles", str(store), "--launch-record", str(record))  # fmt: skip
    keyless = cli(*args, env={"SIM_ENGINE_KEY": ENGINE_KEY})
    assert keyless.returncode == 2
    engine = keyed.urls["e0"]
    assert (
        f"FAIL e0: context limit: HTTP 401 from {engine}/v1/models: the server wants an API key; "
        "NARWHAL_API_KEY is not set (use --api-key-env NAME)"
    ) in keyless.stdout
    assert "ok   e0: prefill domain" in keyless.stdout
    keyed_check = cli(*args, "--api-key-env", "SIM_ENGINE_KEY", env={"SIM_ENGINE_KEY": ENGINE_KEY})
    assert "ok   e0: context limit: 1056 tokens, max_model_len 32768" in keyed_check.stdout
    assert "ok   e0: prefix caching off (metrics)" in keyed_check.stdout
    other_limit = cli(*args, "--api-key-env", "SIM_ENGINE_KEY", "--max-model-len", "4096",
                      env={"SIM_ENGINE_KEY": ENGINE_KEY})  # fmt: skip
    assert (
        f"FAIL e0: context limit: --max-model-len 4096 disagrees with the max_model_len 32768 "
        f"that {engine} reports"
    ) in other_limit.stdout
    _no_key_in([keyless.stdout, keyed_check.stdout, other_limit.stdout], [tmp_path])
