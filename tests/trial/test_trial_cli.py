"""The command line the runbook pastes: its flags, defaults, usage errors and ``reconcile``."""

from __future__ import annotations

import re
import subprocess
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
import pytest

from narwhal_trial import RunSettings

from .conftest import LAUNCHER, Cli, trial_env


def _flags(help_text: str) -> set[str]:
    return set(re.findall(r"--[a-z][a-z-]+", help_text))


def test_runbook_flags_exist(cli: Cli) -> None:
    """prepare and run accept exactly the runbook's flags (plus documented extras)."""
    prepare = _flags(cli("prepare", "--help").stdout)
    assert {"--base", "--input-tokens", "--output-tokens", "--seed", "--out"} <= prepare
    run = cli("run", "--help").stdout
    assert {"--base", "--workload", "--rate", "--requests", "--ttft", "--tpot", "--attainment",
            "--out", "--max-in-flight", "--max-lag", "--request-timeout", "--drain-timeout",
            "--drain-gauge"} <= _flags(run)  # fmt: skip
    assert "NARWHAL_TRIAL_URL" in run


def test_default_limits_are_the_runbooks() -> None:
    """64 requests in flight and 50 ms of scheduling lag unless raised on purpose."""
    settings = RunSettings(
        base_url="http://127.0.0.1:1",
        workload_path=Path("w.json"),
        rate=0.5,
        requests=200,
        ttft_s=Decimal("2"),
        tpot_s=Decimal("0.0333"),
        attainment=Decimal("0.95"),
        out=Path("out"),
    )
    assert (settings.max_in_flight, settings.max_lag_s) == (64, 0.05)


def test_transport_auto_is_raw_for_http_and_httpx_for_https() -> None:
    """``--transport auto`` (the default) resolves against the base URL's scheme."""
    fields: dict[str, Any] = {
        "workload_path": Path("w.json"),
        "rate": 1.0,
        "requests": 1,
        "ttft_s": Decimal("2"),
        "tpot_s": Decimal("0.0333"),
        "attainment": Decimal("0.95"),
        "out": Path("out"),
    }
    plain = RunSettings(base_url="http://127.0.0.1:1", **fields)
    tls = RunSettings(base_url="https://router.example", **fields)
    assert plain.transport == tls.transport == "auto"
    assert (plain.stream_transport, tls.stream_transport) == ("raw", "httpx")
    chosen = RunSettings(base_url="http://127.0.0.1:1", transport="httpx", **fields)
    assert chosen.stream_transport == "httpx" and chosen.arguments()["transport"] == "httpx"


def test_raw_transport_with_an_https_base_is_a_usage_error(cli: Cli, tmp_path: Path) -> None:
    """--transport raw has no TLS: an https:// base exits 1 naming both, and writes nothing."""
    proc = cli("run", "--base", "https://router.example:8443", "--workload",
               str(tmp_path / "w.json"), "--rate", "1", "--requests", "1", "--ttft", "2",
               "--tpot", "0.0333", "--attainment", "0.95", "--out", str(tmp_path / "o"),
               "--transport", "raw")  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    assert "--transport raw" in proc.stderr and "https://router.example:8443" in proc.stderr
    assert not (tmp_path / "o").exists()


def test_bad_values_are_blocking_errors(cli: Cli, tmp_path: Path) -> None:
    """An attainment above 1 or a zero rate exits 1 (2 is a judged run) before anything is
    created."""
    base = ["run", "--base", "http://127.0.0.1:1", "--workload", str(tmp_path / "w.json"),
            "--requests", "10", "--ttft", "2", "--tpot", "0.0333",
            "--out", str(tmp_path / "o")]  # fmt: skip
    bad = cli(*base, "--rate", "1", "--attainment", "1.5")
    assert bad.returncode == 1 and "--attainment" in bad.stderr
    zero = cli(*base, "--rate", "0", "--attainment", "0.95")
    assert zero.returncode == 1 and "--rate" in zero.stderr
    assert not (tmp_path / "o").exists()


_RUNBOOK_RUN = ("run", "--base", "http://127.0.0.1:9", "--workload", "workload.json",
                "--rate", "0.5", "--requests", "200", "--ttft", "2", "--tpot", "0.0333",
                "--attainment", "0.95", "--out", "rate-0.5")  # fmt: skip


def _typo(args: tuple[str, ...], flag: str, value: str | None) -> tuple[str, ...]:
    """``args`` with ``flag``'s value replaced by ``value`` (None: the flag left out)."""
    at = args.index(flag)
    rest = args[:at] + args[at + 2 :]
    return rest if value is None else (*args[: at + 1], value, *args[at + 2 :])


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (_typo(_RUNBOOK_RUN, "--rate", "x"), "Invalid value for '--rate'"),
        (_typo(_RUNBOOK_RUN, "--requests", "2OO"), "Invalid value for '--requests'"),
        (_typo(_RUNBOOK_RUN, "--out", None), "Missing option '--out'"),
        ((*_RUNBOOK_RUN, "--rat", "1"), "No such option: --rat"),
        ((*_RUNBOOK_RUN, "--transport", "tcp"), "Invalid value for '--transport'"),
        (_typo(_RUNBOOK_RUN, "--ttft", "2s"), "--ttft"),
        (("prepare", "--base", "http://127.0.0.1:9", "--input-tokens", "0", "--output-tokens",
          "128", "--seed", "1729", "--out", "workload"), "Invalid value for '--input-tokens'"),
        (("check", "--workload", "workload.json", "--fleet", "f.json"), "Missing option"),
        (("reconcile", "--requests", "r.jsonl", "--journal"), "requires an argument"),
        (("predict", "--fleet", "f.json", "--profiles", "p.json", "--input-tokens", "8",
          "--output-tokens", "8", "--requests", "0", "--ttft", "2", "--tpot", "0.03",
          "--attainment", "0.95", "--rate", "1"), "Invalid value for '--requests'"),
        (("runn",), "No such command 'runn'"),
    ],
    ids=["rate-x", "requests-letter-o", "no-out", "rat", "transport", "ttft-unit", "prepare-zero",
         "check-no-profiles", "reconcile-no-value", "predict-zero", "no-such-command"],
)  # fmt: skip
def test_usage_errors_exit_1_with_one_line_and_write_nothing(
    args: tuple[str, ...], needle: str, tmp_path: Path
) -> None:
    """A typo in the runbook's command line is a blocking error (exit 1), never the runbook's 2
    ("inspect summary.json"): one ``load_trial.py: error:`` line, no usage block, no traceback,
    nothing on stdout, and nothing written in the folder it ran in."""
    proc = subprocess.run(
        [sys.executable, str(LAUNCHER), *args],
        capture_output=True, text=True, timeout=60, check=False, cwd=tmp_path,
        env=trial_env({"NARWHAL_TRIAL_URL": ""}),
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.startswith("load_trial.py: error: ") and proc.stderr.count("\n") == 1
    assert needle in proc.stderr, proc.stderr
    assert "Usage:" not in proc.stderr and "Traceback" not in proc.stderr
    assert proc.stdout == ""
    assert list(tmp_path.iterdir()) == []


def test_reconcile_command_exit_codes(cli: Cli, tmp_path: Path) -> None:
    """reconcile exits 0 when every record has its journal entry and 2 when one is missing."""
    run = "trial-20261130T000000Z-0000abcd"
    record = {
        "format": "narwhal.trial.request", "format_version": 1, "sequence": 0,
        "request_id": f"{run}-000000", "due_s": 0.0, "sent": True, "sent_s": 0.001,
        "lag_s": 0.001, "end_s": 1.0, "in_flight": 0, "status": "completed", "miss_reason": None,
        "http_status": 200, "error": None, "ttft_s": 0.1, "tpot_s": 0.01, "e2e_s": 1.0,
        "prompt_tokens": 8192, "completion_tokens": 128, "chunks": 128, "finish_reason": "length",
        "bytes_sent": 1, "bytes_received": 1, "good": True,
    }  # fmt: skip
    requests = tmp_path / "requests.jsonl"
    requests.write_bytes(orjson.dumps(record) + b"\n")
    entry = {"request_id": f"{run}-000000", "status": "ok", "completion_tokens": 128}
    journal = tmp_path / "journal.jsonl"
    journal.write_bytes(orjson.dumps(entry) + b"\n")
    ok = cli("reconcile", "--requests", str(requests), "--journal", str(journal), "--json")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert orjson.loads(ok.stdout)["matched"] == 1
    journal.write_bytes(b"")
    missing = cli("reconcile", "--requests", str(requests), "--journal", str(journal))
    assert missing.returncode == 2 and "unmatched" in missing.stdout
    broken = cli("reconcile", "--requests", str(journal), "--journal", str(tmp_path / "none"))
    assert broken.returncode == 1 and "cannot read" in broken.stderr


def test_module_and_launcher_are_the_same_command() -> None:
    """``python -m narwhal_trial`` lists the same four commands as the launcher."""
    proc = subprocess.run(
        [sys.executable, "-m", "narwhal_trial", "--help"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 0
    for command in ("prepare", "run", "check", "reconcile"):
        assert command in proc.stdout


@pytest.mark.parametrize("argv", [[str(LAUNCHER)], ["-m", "narwhal_trial"]])
def test_version_prints_the_installed_distribution(argv: list[str]) -> None:
    """``--version`` from the launcher and from ``python -m``: the distribution and its version,
    exit 0; ``python -m`` names the command, not ``__main__.py``, in its usage line."""
    proc = subprocess.run([sys.executable, *argv, "--version"], capture_output=True, text=True,
                          timeout=60, check=False, env=trial_env())  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert re.fullmatch(r"narwhal-trial \(narwhal-trial\) \d+\.\d+\.\d+\n", proc.stdout)
    usage = subprocess.run([sys.executable, *argv, "--help"], capture_output=True, text=True,
                           timeout=60, check=False, env=trial_env()).stdout  # fmt: skip
    assert usage.startswith(f"Usage: {'load_trial.py' if argv[0] != '-m' else 'narwhal-trial'} ")
