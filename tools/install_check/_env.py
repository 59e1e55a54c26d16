"""A clean environment for the README lines and the installed commands, and the shell that runs
them: nothing of the workspace on PATH or in the variables, uv from a private folder.

``clean_env(first, uv_dir)`` starts from this process's environment without the variables that
would point Python or an installer at the workspace (``PYTHONPATH``, ``VIRTUAL_ENV``,
``UV_PYTHON``...), drops every PATH entry inside the checkout or inside a venv, and puts ``first``
then ``uv_dir`` (a folder holding only ``uv``) in front. pip's and uv's caches are left alone, so a
warm machine installs from them. ``run_block`` runs a README block as written, with bash, ``-e``,
``-u`` and ``pipefail``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
#: Variables that would put the workspace (or another prefix) in front of the installed code.
DROPPED = frozenset(
    {
        "PYTHONPATH",
        "PYTHONHOME",
        "PYTHONSTARTUP",
        "PYTHONUSERBASE",
        "VIRTUAL_ENV",
        "VIRTUAL_ENV_PROMPT",
        "CONDA_PREFIX",
        "CONDA_DEFAULT_ENV",
        "UV_PROJECT_ENVIRONMENT",
        "UV_PROJECT",
        "UV_PYTHON",
        "UV_TOOL_DIR",
        "UV_TOOL_BIN_DIR",
        "PIP_TARGET",
        "PIP_PREFIX",
        "PIP_USER",
        "PIP_REQUIRE_VIRTUALENV",
    }
)
#: Seconds one README block may take (a cold cache downloads numpy, scipy, matplotlib...).
BLOCK_TIMEOUT_S = 30 * 60


class BlockFailed(Exception):
    """A README block exited non-zero (the message holds its text and the log's tail)."""


def uv_folder(folder: Path, uv: Path) -> Path:
    """``folder`` holding one link, ``uv``, to ``uv``: what the blocks find on PATH."""
    folder.mkdir(parents=True, exist_ok=True)
    link = folder / "uv"
    if not link.exists():
        link.symlink_to(uv)
    return folder


def _outside(entry: str) -> bool:
    """A PATH entry that is neither in the checkout nor a venv's ``bin``."""
    if not entry:
        return False
    path = Path(entry).resolve()
    if path == REPO or REPO in path.parents:
        return False
    return not (path.parent / "pyvenv.cfg").is_file()


def clean_env(first: Sequence[Path], uv_dir: Path, **extra: str) -> dict[str, str]:
    """This process's environment without the workspace: ``first`` and ``uv_dir`` lead PATH."""
    env = {k: v for k, v in os.environ.items() if k not in DROPPED}
    # uv compiles nothing at install: let the first command of a tool venv write the bytecode
    # the next ones read, as on an operator's machine.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    kept = [e for e in env.get("PATH", "").split(os.pathsep) if _outside(e)]
    env["PATH"] = os.pathsep.join([*(str(p) for p in first), str(uv_dir), *kept])
    env["UV_PYTHON_DOWNLOADS"] = "never"  # an interpreter never comes from the network
    env["COLUMNS"] = "120"  # the same help text however the tier is started
    env.update(extra)
    return env


def activated(venv: Path, uv_dir: Path) -> dict[str, str]:
    """The environment of ``. VENV/bin/activate``: its bin first, ``VIRTUAL_ENV`` set."""
    return clean_env([venv / "bin"], uv_dir, VIRTUAL_ENV=str(venv))


def which(name: str, env: dict[str, str]) -> Path:
    """``name`` as ``env``'s PATH finds it (``FileNotFoundError`` when it does not)."""
    found = shutil.which(name, path=env["PATH"])
    if found is None:
        raise FileNotFoundError(f"{name} is not on PATH {env['PATH']}")
    return Path(found)


def make_venv(folder: Path, env: dict[str, str], log: Path) -> Path:
    """``python3 -m venv FOLDER`` with the first ``python3`` on the clean PATH."""
    python3 = which("python3", env)
    with log.open("ab") as out:
        done = subprocess.run(
            [str(python3), "-m", "venv", str(folder)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=BLOCK_TIMEOUT_S,
            check=False,
        )
    if done.returncode != 0:
        raise BlockFailed(f"python3 -m venv {folder} exited {done.returncode}:\n{tail(log)}")
    return folder


def run_block(text: str, cwd: Path, env: dict[str, str], log: Path) -> None:
    """Run a README block exactly as written (bash, ``-euo pipefail``) in ``cwd``; its output
    goes to ``log``. ``BlockFailed`` when it exits non-zero."""
    script = log.with_suffix(".sh")
    script.write_text(text, encoding="utf-8")
    bash = which("bash", env)
    with log.open("ab") as out:
        out.write(f"$ (cd {cwd}) bash -euo pipefail <<'EOF'\n{text}EOF\n".encode())
        out.flush()
        done = subprocess.run(
            [str(bash), "--noprofile", "--norc", "-e", "-u", "-o", "pipefail", str(script)],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=BLOCK_TIMEOUT_S,
            check=False,
        )
    if done.returncode != 0:
        raise BlockFailed(f"exit {done.returncode} from:\n{text}--- log tail:\n{tail(log)}")


def tail(path: Path, limit: int = 4000) -> str:
    """The end of a log file."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(no log)"
    return text[-limit:].strip() or "(empty log)"
