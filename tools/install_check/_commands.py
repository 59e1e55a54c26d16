"""What each installed target must do: the module of every distribution, and for each command
``--help``, ``--version``, ``python -m MODULE --help`` and one real command against the simulator.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from narwhal_sim.testing import fleet_document, free_port

from ._env import which
from ._installed import Installed, said
from ._services import ENGINE, RUN, SHAPE, SWEEP, TIME_SCALE, Services, read_json
from ._services import write_fleet_file as _write_fleet_file


@dataclass(frozen=True)
class Cli:
    """One distribution's command: its name, what its ``--help`` must mention."""

    command: str
    help_marks: tuple[str, ...]


#: Every distribution's import name.
MODULES = {
    "narwhal-engine-client": "narwhal_engine_client",
    "narwhal-fit": "narwhal_fit",
    "narwhal-store": "narwhal_store",
    "narwhal-profile-cli": "narwhal_profile_cli",
    "narwhal-trial": "narwhal_trial",
    "narwhal-report": "narwhal_report",
    "narwhal-sim": "narwhal_sim",
}
#: The distributions that carry a command.
CLIS = {
    "narwhal-profile-cli": Cli("narwhal-profile", ("--fleet", "--prefill-lens")),
    "narwhal-trial": Cli("narwhal-trial", ("prepare", "run", "predict")),
    "narwhal-report": Cli("narwhal-report", ("--out", "--fleet")),
    "narwhal-sim": Cli("narwhal-sim", ("up", "presets")),
}


def check_command(installed: Installed, cli: Cli, module: str, version: str) -> None:
    """``CLI --help``, ``CLI --version`` (its line ends with ``version``) and ``python -m MODULE
    --help`` (the same text), the command found in the installed ``bin``."""
    found = which(cli.command, installed.env)
    assert found == installed.bin / cli.command, (found, installed.bin)
    helped = installed.run(cli.command, "--help")
    assert helped.returncode == 0, said(helped)
    for mark in cli.help_marks:
        assert mark in helped.stdout, (
            f"{cli.command} --help does not mention {mark}:\n{said(helped)}"
        )
    shown = installed.run(cli.command, "--version")
    assert shown.returncode == 0, said(shown)
    words = shown.stdout.split()
    assert len(shown.stdout.strip().splitlines()) == 1, said(shown)
    assert words[0] == cli.command and words[-1] == version, said(shown)
    as_module = installed.run(str(installed.python), "-m", module, "--help")
    assert as_module.returncode == 0, said(as_module)
    assert as_module.stdout == helped.stdout, said(as_module)


def profile_sweep(installed: Installed, services: Services, versions: dict[str, str]) -> None:
    """A small live sweep of one simulated engine: the store and its sidecar, one profile."""
    fleet = _write_fleet_file(installed.work, services.fleet)
    done = installed.run("narwhal-profile", "--fleet", fleet.name, *SWEEP)
    assert done.returncode == 0, said(done)
    store = installed.work / "profiles" / "fleet-profiles.json"
    assert "wrote 1 profile(s) to profiles/fleet-profiles.json" in done.stdout, said(done)
    doc = read_json(store)
    assert doc["format"] == "narwhal.profiles", doc["format"]
    profiles = doc["profiles"]
    assert isinstance(profiles, list) and [p["key"]["engine"] for p in profiles] == [ENGINE]
    assert (installed.work / "profiles" / "fleet-profiles.samples.json").is_file()


def trial_prepare_and_run(
    installed: Installed, services: Services, versions: dict[str, str]
) -> None:
    """``prepare`` then a 4-request ``run`` through the router, from an empty folder: the workload,
    the records, and a manifest naming the installed narwhal versions."""
    base = str(services.fleet.router_url)
    prepared = installed.run(
        "narwhal-trial", "prepare", "--base", base, *SHAPE, "--out", "workload"
    )
    assert prepared.returncode == 0, said(prepared)
    workload = read_json(installed.work / "workload" / "workload.json")
    assert workload["input_tokens"] == 64 and workload["output_tokens"] == 8, workload
    ran = installed.run(
        "narwhal-trial", "run", "--base", base, "--workload", "workload/workload.json", *RUN,
        "--out", "rate-4",
    )  # fmt: skip
    # 0: passed; 2: judged, a schedule missed on a busy machine. Either way every record is there.
    assert ran.returncode in (0, 2), said(ran)
    summary = read_json(installed.work / "rate-4" / "summary.json")
    assert summary["requests"] == 4 and summary["offered"] == 4, summary
    manifest = read_json(installed.work / "rate-4" / "manifest.json")
    assert manifest["packages"] == versions, manifest["packages"]


def trial_prepare_with_tokenizer(
    installed: Installed, services: Services, versions: dict[str, str]
) -> None:
    """``prepare --tokenizer`` through a frontend that returns no token ids (Dynamo's): the pool
    comes from the local tokenizer, which only the ``tokenizer`` extra brings."""
    prepared = installed.run(
        "narwhal-trial", "prepare", "--base", str(services.dynamo.router_url), *SHAPE,
        "--tokenizer", str(services.model_dir), "--max-model-len", "4096", "--out", "workload",
    )  # fmt: skip
    assert prepared.returncode == 0, said(prepared)
    workload = read_json(installed.work / "workload" / "workload.json")
    seed = workload["seed_prompt"]
    assert isinstance(seed, dict) and seed["token_ids_source"] == "tokenizer", seed


def report_page(installed: Installed, services: Services, versions: dict[str, str]) -> None:
    """A page from a profile store and a trial run folder: exit 0, an HTML file with figures."""
    store, run = services.report_inputs
    done = installed.run("narwhal-report", str(store), str(run), "--out", "report.html")
    assert done.returncode == 0, said(done)
    assert done.stdout.strip() == "wrote report to report.html", said(done)
    page = (installed.work / "report.html").read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "<svg" in page, page[:200]


def sim_up(installed: Installed, services: Services, versions: dict[str, str]) -> None:
    """``narwhal-sim up`` with a one-engine fleet on a free loopback port: it answers
    ``GET /v1/models`` and stops cleanly (exit 0) on SIGTERM."""
    for _ in range(3):  # a free port can be taken before the simulator binds it
        port = free_port()
        fleet = installed.work / "fleet.json"
        doc = fleet_document([{"iid": ENGINE, "role": "mixed"}], {ENGINE: port})
        fleet.write_text(json.dumps(doc), encoding="utf-8")
        ready = installed.work / "ready.json"
        ready.unlink(missing_ok=True)
        log = installed.work / "sim.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                ["narwhal-sim", "up", "--fleet", "fleet.json", "--ready-file", ready.name,
                 "--time-scale", repr(TIME_SCALE)],
                cwd=installed.work, env=installed.env, stdin=subprocess.DEVNULL, stdout=out,
                stderr=subprocess.STDOUT,
            )  # fmt: skip
        try:
            if not _wait_ready(proc, ready, timeout_s=120.0):
                text = log.read_text(encoding="utf-8", errors="replace")
                if "cannot listen" in text:
                    continue
                raise AssertionError(
                    f"narwhal-sim up never got ready (exit {proc.poll()}):\n{text}"
                )
            url = json.loads(ready.read_text(encoding="utf-8"))["engines"][ENGINE]
            with urllib.request.urlopen(f"{url}/v1/models", timeout=30) as answer:
                models = json.loads(answer.read())
            assert models["object"] == "list" and models["data"][0]["id"], models
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
            try:
                code = proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                raise
        text = log.read_text(encoding="utf-8", errors="replace")
        assert code == 0 and "narwhal-sim: stopped" in text, f"exit {code}:\n{text}"
        return
    raise AssertionError("narwhal-sim could not listen on a free port in 3 tries")


def _wait_ready(proc: subprocess.Popen[bytes], ready: Path, timeout_s: float) -> bool:
    """Whether ``ready`` appeared before the process exited or the time ran out."""
    deadline = time.monotonic() + timeout_s
    while not ready.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


Check = Callable[[Installed, Services, dict[str, str]], None]
#: The real command of each target (``DIST`` or ``DIST[EXTRA]``); a target missing here is a
#: library, checked by importing it.
REAL_COMMANDS: dict[str, Check] = {
    "narwhal-profile-cli": profile_sweep,
    "narwhal-trial": trial_prepare_and_run,
    "narwhal-trial[tokenizer]": trial_prepare_with_tokenizer,
    "narwhal-report": report_page,
    "narwhal-sim": sim_up,
}
