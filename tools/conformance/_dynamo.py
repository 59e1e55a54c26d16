"""Start and stop NVIDIA Dynamo 1.6.1's OpenAI frontend with its GPU-free mocker engine behind it.

Two processes from the Dynamo venv (``_dynamo_venv.py``), each in its own process group, each
with its own log in the tier's folder: ``python -m dynamo.frontend`` (HTTP on a free loopback
port) and ``python -m dynamo.mocker`` (serving the model folder as ``tiny``). They find each other
through a file discovery store in the run folder (``DYN_FILE_KV``), talk over TCP on loopback
(request plane) and ZMQ (event plane); no etcd, no NATS. ``HOME`` points into the run folder: the
frontend caches the model card under ``$HOME/.cache/dynamo``.

Readiness, with one deadline for both steps: ``GET /v1/models`` lists ``tiny``, then a one-token
completion answers 200. A process that exits first, or a deadline that passes, fails with both
logs' tails. Stopping: SIGINT to each group, then SIGTERM, then SIGKILL.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ._server import spawn_logged, stop_group
from ._venv import tail

MODEL_NAME = "tiny"
#: The context limit the model folder declares and the trial is given (the frontend shows none).
MAX_MODEL_LEN = 4096
#: One deadline for both readiness steps (a busy 2-core machine may take minutes).
READY_TIMEOUT_S = 480.0
POLL_S = 1.0
STOP_GRACE_S = 20.0
#: Everything on loopback; the discovery store and the caches in the run folder.
LOOPBACK_ENV = {
    "DYN_TCP_RPC_HOST": "127.0.0.1",
    "DYN_EVENT_PLANE_HOST": "127.0.0.1",
    "DYN_TCP_RESPONSE_STREAM_HOST": "127.0.0.1",
    "DYN_SYSTEM_HOST": "127.0.0.1",
    "DYN_SELF_HOST_METADATA": "0",
    "DYN_SDK_DISABLE_ANSI_LOGGING": "1",
    "NO_COLOR": "1",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "PYTHONUNBUFFERED": "1",
}
PLANES = ("--discovery-backend", "file", "--request-plane", "tcp", "--event-plane", "zmq")


class DynamoError(Exception):
    """The frontend or the mocker did not start, or stopped."""


@dataclass
class Proc:
    """One of the two processes: its name, argv, log and process."""

    name: str
    argv: list[str]
    log: Path
    process: subprocess.Popen[bytes]
    exit_code: int | None = None


@dataclass
class DynamoStack:
    """The running frontend and mocker."""

    port: int
    folder: Path
    model_dir: Path
    frontend: Proc
    mocker: Proc
    started_s: float
    ready_s: float | None = None
    models_s: float | None = None

    @property
    def url(self) -> str:
        """The frontend's ``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def procs(self) -> tuple[Proc, Proc]:
        """Both processes, the frontend first."""
        return (self.frontend, self.mocker)

    def logs_tail(self, lines: int = 40) -> str:
        """Both logs' tails, for error messages."""
        return "\n".join(f"--- {p.name} log {p.log}:\n{tail(p.log, lines)}" for p in self.procs)

    def command_lines(self) -> dict[str, str]:
        """Both command lines as typed (for results.json)."""
        return {p.name: shlex.join(p.argv) for p in self.procs}


def frontend_argv(python: Path, port: int) -> list[str]:
    """The frontend's command line."""
    return [
        str(python), "-m", "dynamo.frontend",
        "--http-host", "127.0.0.1", "--http-port", str(port), *PLANES,
    ]  # fmt: skip


def mocker_argv(python: Path, model_dir: Path) -> list[str]:
    """The mocker's command line (its scheduler defaults: 256 sequences, 8,192 tokens a step)."""
    return [
        str(python), "-m", "dynamo.mocker",
        "--model-path", str(model_dir), "--model-name", MODEL_NAME, *PLANES,
    ]  # fmt: skip


def _environment(folder: Path) -> dict[str, str]:
    env = {k: os.environ[k] for k in ("PATH", "LANG", "TMPDIR") if k in os.environ}
    env.update(LOOPBACK_ENV)
    home = folder / "home"
    store = folder / "discovery"
    for path in (home, store):
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    env["HOME"] = str(home)
    env["DYN_FILE_KV"] = str(store)
    return env


def _spawn(name: str, argv: list[str], log: Path, env: dict[str, str]) -> Proc:
    process = spawn_logged(argv, log, env)
    return Proc(name, argv, log, process)


def start(python: Path, folder: Path, model_dir: Path, port: int) -> DynamoStack:
    """Start the frontend, then the mocker (not yet ready)."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    env = _environment(folder)
    started = time.monotonic()
    frontend = _spawn("frontend", frontend_argv(python, port), folder / "frontend.log", env)
    try:
        mocker = _spawn("mocker", mocker_argv(python, model_dir), folder / "mocker.log", env)
    except BaseException:
        _stop_one(frontend)
        raise
    return DynamoStack(port, folder, model_dir, frontend, mocker, started)


def _get(url: str) -> tuple[int | None, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return int(answer.status), answer.read()
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, b""
    except (urllib.error.URLError, OSError, ValueError):
        return None, b""


def _one_token(url: str) -> int | None:
    body = {"model": MODEL_NAME, "prompt": [11, 12, 13, 14], "max_tokens": 1, "stream": False}
    request = urllib.request.Request(
        f"{url}/v1/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            answer.read()
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code
    except (urllib.error.URLError, OSError, ValueError):
        return None


def listed_models(url: str) -> list[str]:
    """The model ids ``GET /v1/models`` lists now (empty when it does not answer 200)."""
    status, raw = _get(f"{url}/v1/models")
    if status != 200:
        return []
    try:
        return [str(m.get("id")) for m in json.loads(raw).get("data", [])]
    except (ValueError, AttributeError):
        return []


def wait_ready(stack: DynamoStack, timeout_s: float = READY_TIMEOUT_S) -> float:
    """Poll until ``tiny`` is listed and a one-token completion answers 200; return the seconds
    start-up took. Raises ``DynamoError`` with both logs' tails."""
    deadline = stack.started_s + timeout_s
    step = "GET /v1/models to list 'tiny'"
    while True:
        for proc in stack.procs:
            code = proc.process.poll()
            if code is not None:
                proc.exit_code = code
                raise DynamoError(
                    f"the Dynamo {proc.name} exited with {code} while waiting for {step}\n"
                    + stack.logs_tail()
                )
        if stack.models_s is None and MODEL_NAME in listed_models(stack.url):
            stack.models_s = time.monotonic() - stack.started_s
            step = "a one-token completion to answer 200"
        if stack.models_s is not None and _one_token(stack.url) == 200:
            stack.ready_s = time.monotonic() - stack.started_s
            return stack.ready_s
        if time.monotonic() > deadline:
            raise DynamoError(
                f"Dynamo did not get ready within {timeout_s:.0f} s: waiting for {step}\n"
                + stack.logs_tail()
            )
        time.sleep(POLL_S)


def _stop_one(proc: Proc) -> None:
    proc.exit_code = stop_group(proc.process, STOP_GRACE_S)


def stop(stack: DynamoStack) -> None:
    """Stop the mocker, then the frontend."""
    for proc in (stack.mocker, stack.frontend):
        _stop_one(proc)


@contextlib.contextmanager
def running(python: Path, folder: Path, model_dir: Path, port: int) -> Iterator[DynamoStack]:
    """A started and ready frontend + mocker, stopped on exit (also on errors and Ctrl-C)."""
    stack = start(python, folder, model_dir, port)
    try:
        wait_ready(stack)
        yield stack
    finally:
        stop(stack)


def build_model_folder(folder: Path, simulator: Path) -> Path:
    """``narwhal-sim model-folder --out FOLDER --context-length 4096``: config.json, tokenizer.json
    and a tokenizer_config.json with the chat template the frontend insists on."""
    argv = [
        str(simulator), "model-folder", "--out", str(folder),
        "--context-length", str(MAX_MODEL_LEN),
    ]  # fmt: skip
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=300, check=False, stdin=subprocess.DEVNULL
    )
    if done.returncode != 0 or not (folder / "tokenizer.json").is_file():
        output = done.stdout[-2000:] + done.stderr[-2000:]
        raise DynamoError(f"{shlex.join(argv)} exited {done.returncode}:\n{output}")
    return folder
