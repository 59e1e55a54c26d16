"""Run our real commands against a server as subprocesses, and read what the server shows.

``narwhal-profile`` (``.venv/bin/narwhal-profile``) and the runbook's launcher
(``.venv/bin/python tools/measurement/load_trial.py``), each with a clean environment to which the
caller adds variables (API keys go there and nowhere else); ``/metrics`` read with the engine
client's Prometheus parser; JSON files read back.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from narwhal_engine_client import MetricsSnapshot

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = REPO / ".venv" / "bin"
PROFILE = VENV_BIN / "narwhal-profile"
REPORT = VENV_BIN / "narwhal-report"
LAUNCHER = REPO / "tools" / "measurement" / "load_trial.py"
COMMAND_TIMEOUT_S = 900.0


@dataclass(frozen=True)
class Done:
    """One finished command: argv (no secrets on it), exit code, outputs, wall time."""

    argv: list[str]
    returncode: int
    stdout: str
    stderr: str
    wall_s: float
    #: Values never to show (the keys in the command's environment).
    secrets: tuple[str, ...] = ()

    def brief(self, limit: int = 3000) -> str:
        """Exit code and the tail of both outputs (keys redacted), for assertion messages."""
        text = (
            f"$ {' '.join(self.argv)}\nexit {self.returncode} after {self.wall_s:.1f} s\n"
            f"--- stdout (tail)\n{self.stdout[-limit:]}\n--- stderr (tail)\n{self.stderr[-limit:]}"
        )
        for secret in self.secrets:
            text = text.replace(secret, "<redacted key>")
        return text

    def json(self) -> dict[str, Any]:
        """The single JSON object on stdout (``--format json``)."""
        lines = [line for line in self.stdout.splitlines() if line.strip()]
        assert len(lines) == 1, self.brief()
        doc = json.loads(lines[0])
        assert isinstance(doc, dict), self.brief()
        return doc


def run(argv: list[str], *, env: Mapping[str, str] | None = None, cwd: Path | None = None) -> Done:
    """Run one command with a minimal environment plus ``env``; never raises on exit codes."""
    full = {k: os.environ[k] for k in ("PATH", "HOME", "LANG", "TMPDIR") if k in os.environ}
    full.update(env or {})
    start = time.monotonic()
    done = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        env=full,
        cwd=cwd or REPO,
        stdin=subprocess.DEVNULL,
        timeout=COMMAND_TIMEOUT_S,
        check=False,
    )
    wall = time.monotonic() - start
    secrets = tuple(v for k, v in (env or {}).items() if "KEY" in k and v)
    return Done(argv, done.returncode, done.stdout, done.stderr, wall, secrets)


def profile(*args: str | Path, env: Mapping[str, str] | None = None) -> Done:
    """``narwhal-profile ARGS``."""
    return run([str(PROFILE), *map(str, args)], env=env)


def report(*args: str | Path) -> Done:
    """``narwhal-report ARGS``."""
    return run([str(REPORT), *map(str, args)])


def trial(*args: str | Path, env: Mapping[str, str] | None = None) -> Done:
    """``python tools/measurement/load_trial.py ARGS`` (the runbook's launcher)."""
    return run([str(VENV_BIN / "python"), str(LAUNCHER), *map(str, args)], env=env)


def metrics(url: str) -> MetricsSnapshot:
    """The server's ``/metrics`` page, parsed."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=30) as answer:
        return MetricsSnapshot.from_text(answer.read().decode("utf-8"))


def get_json(url: str, headers: Mapping[str, str] | None = None) -> dict[str, Any]:
    """A GET answered with a JSON object."""
    request = urllib.request.Request(url, headers=dict(headers or {}))
    with urllib.request.urlopen(request, timeout=30) as answer:
        doc = json.loads(answer.read())
    assert isinstance(doc, dict), doc
    return doc


def post_json(url: str, body: Mapping[str, Any]) -> dict[str, Any]:
    """A POST of a JSON body answered with a JSON object."""
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        doc = json.loads(answer.read())
    assert isinstance(doc, dict), doc
    return doc


def get_status(url: str, headers: Mapping[str, str] | None = None) -> int:
    """A GET's HTTP status, the connection closed whatever it is (an error response too: an
    unclosed one is a ResourceWarning that fails whichever test collects it)."""
    request = urllib.request.Request(url, headers=dict(headers or {}))
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code


def read_json(path: Path) -> dict[str, Any]:
    """A JSON document from disk."""
    doc = json.loads(path.read_bytes())
    assert isinstance(doc, dict), path
    return doc


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Every JSON line of a file."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def write_fleet(
    folder: Path,
    url: str,
    *,
    iid: str,
    model: str,
    api_key_env: str | None = None,
    contract: Mapping[str, Any] | None = None,
) -> Path:
    """A one-engine fleet file (role ``mixed``) whose profiles go to ``folder/profiles``."""
    engine: dict[str, Any] = {"iid": iid, "url": url, "role": "mixed", "model": model}
    if contract is not None:
        engine["engine_contract"] = dict(contract)
    if api_key_env is not None:
        engine["api_key_env"] = api_key_env
    doc = {
        "format": "narwhal.fleet",
        "format_version": 1,
        "profiles": {"path": "profiles/fleet-profiles.json"},
        "engines": [engine],
    }
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = folder / "fleet.json"
    path.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    return path
