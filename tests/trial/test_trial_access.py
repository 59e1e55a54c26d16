"""--base without credentials, --api-key-env, and the message for a server that wants a key."""

from __future__ import annotations

from pathlib import Path
from typing import get_args

import pytest

from narwhal_engine_client import EngineConnectError, EngineHTTPError
from narwhal_trial import DEFAULT_GAUGES, DRAIN_PRESETS, ApiKeyEnv, TrialError, TrialUsageError
from narwhal_trial._access import refuse_credentials
from narwhal_trial.run._drain import DrainPreset

from .conftest import Cli

SECRET = "sk-d41d8cd98f00b204e980"


def test_default_variable_is_optional_and_a_named_one_must_be_set() -> None:
    """No --api-key-env: NARWHAL_API_KEY when set, else no key; a named variable must hold one."""
    assert ApiKeyEnv.choose(None, {}) == ApiKeyEnv("NARWHAL_API_KEY", given=False, is_set=False)
    assert ApiKeyEnv.choose(None, {}).sent_from is None
    assert ApiKeyEnv.choose(None, {"NARWHAL_API_KEY": SECRET}).sent_from == "NARWHAL_API_KEY"
    assert ApiKeyEnv.choose("MY_KEY", {"MY_KEY": SECRET}).sent_from == "MY_KEY"
    for environ in ({}, {"MY_KEY": ""}):
        with pytest.raises(TrialUsageError, match="environment variable MY_KEY is not set"):
            ApiKeyEnv.choose("MY_KEY", environ)
    with pytest.raises(TrialUsageError, match="never the key itself") as info:
        ApiKeyEnv.choose(SECRET, {})
    assert SECRET not in info.value.message
    assert repr(ApiKeyEnv.choose("MY_KEY", {"MY_KEY": SECRET})).count(SECRET) == 0


def test_refusal_names_the_url_and_the_variable() -> None:
    """401 and 403, raised or as the cause of a trial error, become the one message; others not."""
    unset = ApiKeyEnv.choose(None, {})
    keyed = ApiKeyEnv.choose("MY_KEY", {"MY_KEY": SECRET})
    models = EngineHTTPError(401, "Unauthorized", None, "http://r:8000/v1/models")
    assert unset.refusal(models) == (
        "HTTP 401 from http://r:8000/v1/models: the server wants an API key; NARWHAL_API_KEY is "
        "not set (use --api-key-env NAME)"
    )
    try:
        raise TrialError("cannot list served models") from EngineHTTPError(403, "Forbidden")
    except TrialError as exc:
        assert keyed.refusal(exc, "http://r:8000/v1/completions") == (
            "HTTP 403 from http://r:8000/v1/completions: the server wants an API key; the key in "
            "MY_KEY was refused"
        )
    assert unset.refusal(EngineHTTPError(404, "Not Found")) is None
    assert unset.refusal(EngineConnectError("refused")) is None
    assert unset.refusal(None) is None


@pytest.mark.parametrize(
    "base",
    [
        f"http://token:{SECRET}@router.example:8000",
        f"http://{SECRET}@router.example",
        f"https://router.example/v1?api_key={SECRET}",
        f"https://router.example/#{SECRET}",
    ],
)
def test_base_with_credentials_is_refused_without_echo(base: str) -> None:
    """User info, a query or a fragment: a usage error that never repeats the URL."""
    with pytest.raises(TrialUsageError) as info:
        refuse_credentials(base)
    assert SECRET not in info.value.message and "--api-key-env" in info.value.message
    refuse_credentials("https://router.example:8443/prefix")  # a path is fine


def _run(base: str, tmp_path: Path, *extra: str) -> tuple[str, ...]:
    return ("run", "--base", base, "--workload", str(tmp_path / "w.json"), "--rate", "1",
            "--requests", "1", "--ttft", "2", "--tpot", "0.0333", "--attainment", "0.95",
            "--out", str(tmp_path / "out"), *extra)  # fmt: skip


def _prepare(base: str, tmp_path: Path, *extra: str) -> tuple[str, ...]:
    return ("prepare", "--base", base, "--input-tokens", "8", "--output-tokens", "8",
            "--seed", "1", "--out", str(tmp_path / "out"), *extra)  # fmt: skip


def _check(tmp_path: Path, *extra: str) -> tuple[str, ...]:
    return ("check", "--workload", str(tmp_path / "w.json"), "--fleet", str(tmp_path / "f.json"),
            "--profiles", str(tmp_path / "p.json"), *extra)  # fmt: skip


def test_commands_refuse_credentials_and_unset_key_variables(cli: Cli, tmp_path: Path) -> None:
    """prepare, run and check: exit 1 (a blocking error; 2 is a judged run) with one line, no
    secret echoed, nothing created."""
    leaky = f"http://token:{SECRET}@127.0.0.1:9"
    cases = [
        (_prepare(leaky, tmp_path), "--base must not carry credentials"),
        (_run(leaky, tmp_path), "--base must not carry credentials"),
        (_run(f"http://127.0.0.1:9/?key={SECRET}", tmp_path), "--base must not carry credentials"),
        (_prepare("http://127.0.0.1:9", tmp_path, "--api-key-env", "NARWHAL_UNSET_KEY_VAR"),
         "--api-key-env NARWHAL_UNSET_KEY_VAR: environment variable NARWHAL_UNSET_KEY_VAR is not"),
        (_run("http://127.0.0.1:9", tmp_path, "--api-key-env", "NARWHAL_UNSET_KEY_VAR"),
         "environment variable NARWHAL_UNSET_KEY_VAR is not set"),
        (_check(tmp_path, "--api-key-env", "NARWHAL_UNSET_KEY_VAR"),
         "environment variable NARWHAL_UNSET_KEY_VAR is not set"),
        (_run("http://127.0.0.1:9", tmp_path, "--api-key-env", SECRET), "never the key itself"),
        (_run("http://127.0.0.1:9", tmp_path, "--drain-preset", "vllm", "--drain-gauge", "g"),
         "give --drain-preset or --drain-gauge, not both"),
        (_run("http://127.0.0.1:9", tmp_path, "--max-model-len", "0"), "--max-model-len"),
        (_check(tmp_path, "--max-model-len", "0"), "--max-model-len"),
    ]  # fmt: skip
    for args, message in cases:
        proc = cli(*args, env={"NARWHAL_API_KEY": SECRET})
        assert proc.returncode == 1, (args, proc.stderr)
        assert proc.stderr.count("\n") == 1, (args, proc.stderr)
        assert message in proc.stderr, (args, proc.stderr)
        assert SECRET not in proc.stdout + proc.stderr
        assert not (tmp_path / "out").exists()


def test_help_tells_where_the_key_goes(cli: Cli) -> None:
    """--api-key-env and its default are in the help of every command that talks to a server."""
    for command in ("prepare", "run", "check"):
        text = cli(command, "--help").stdout
        assert "--api-key-env" in text and "NARWHAL_API_KEY" in text, command
    run = cli("run", "--help").stdout
    for word in ("--drain-preset", "narwhal-router", "vllm", "dynamo", "none", "--max-model-len"):
        assert word in run
    assert "--max-model-len" in cli("check", "--help").stdout


def test_every_drain_preset_has_its_gauges() -> None:
    """The --drain-preset choices are the table's keys; the default is docs/design.md §9's four
    gauges."""
    assert set(DRAIN_PRESETS) == set(get_args(DrainPreset))
    assert DRAIN_PRESETS["narwhal-router"] == DEFAULT_GAUGES and DRAIN_PRESETS["none"] == ()
    assert all(DRAIN_PRESETS[p] for p in DRAIN_PRESETS if p != "none")
