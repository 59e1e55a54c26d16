"""One installed target: its interpreter, its commands' folder and its clean environment, and the
probe that says, from inside it, where the module came from and which narwhal wheels are there.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

#: Seconds one command of an installed target may take (a profile sweep on a busy machine).
COMMAND_TIMEOUT_S = 600

_PROBE = r"""
import importlib, importlib.metadata as md, json, sys
module, extra_names = sys.argv[1], json.loads(sys.argv[2])
imported = importlib.import_module(module)
exported = [getattr(imported, name) is not None for name in getattr(imported, "__all__", [])]
narwhal = {}
for found in md.distributions():
    name = (found.metadata["Name"] or "").lower().replace("_", "-")
    if name.startswith("narwhal-"):
        direct = found.read_text("direct_url.json")
        narwhal[name] = {
            "version": found.version,
            "url": json.loads(direct)["url"] if direct else None,
            "scripts": sorted(
                e.name for e in found.entry_points if e.group == "console_scripts"
            ),
        }
extras = {}
for name in extra_names:
    try:
        extras[name] = md.version(name)
    except md.PackageNotFoundError:
        extras[name] = None
print(json.dumps({
    "file": imported.__file__,
    "prefix": sys.prefix,
    "path": sys.path,
    "exported": len(exported),
    "narwhal": narwhal,
    "extras": extras,
}))
"""


@dataclass(frozen=True)
class Installed:
    """What a block installed: ``python`` of its venv (the tool's, for ``uv tool``), ``bin`` (where
    its commands are), ``env`` (clean, ``bin`` first on PATH) and ``work``, an empty folder that
    every command runs in."""

    python: Path
    bin: Path
    env: dict[str, str]
    work: Path

    def run(
        self, *args: str, timeout: float = COMMAND_TIMEOUT_S
    ) -> subprocess.CompletedProcess[str]:
        """Run a command in ``work`` with ``env`` (PATH decides which program), no stdin."""
        return subprocess.run(
            list(args),
            cwd=self.work,
            env=self.env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def probe(self, module: str, extra_names: list[str]) -> dict[str, Any]:
        """Import ``module`` in the installed interpreter and report what the environment holds."""
        done = self.run(str(self.python), "-c", _PROBE, module, json.dumps(extra_names))
        if done.returncode != 0:
            raise AssertionError(f"the probe of {module} failed:\n{done.stdout}{done.stderr}")
        report = json.loads(done.stdout.strip().splitlines()[-1])
        assert isinstance(report, dict)
        return report


def said(done: subprocess.CompletedProcess[str]) -> str:
    """A finished command's arguments, exit code and output, for an assertion message."""
    output = f"--- stdout:\n{done.stdout}--- stderr:\n{done.stderr}"
    return f"{done.args} exited {done.returncode}\n{output}"


def url_path(url: str | None) -> Path | None:
    """The local path of a ``file://`` URL, resolved; None for anything else."""
    if not url:
        return None
    parsed = urlparse(url)
    if parsed.scheme != "file":
        return None
    return Path(unquote(parsed.path)).resolve()


def inside(path: Path, folder: Path) -> bool:
    """Whether ``path`` is ``folder`` or below it (both resolved)."""
    path, folder = path.resolve(), folder.resolve()
    return path == folder or folder in path.parents
