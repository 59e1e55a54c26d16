"""Build the model folder (config + tokenizer) with the vLLM venv's interpreter."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

BUILD_SCRIPT = Path(__file__).resolve().with_name("build_model.py")


class ModelError(Exception):
    """The model folder could not be built."""


def build_model(python: Path, out: Path) -> dict[str, Any]:
    """Run ``build_model.py OUT`` with ``python``; its JSON report (vocab size, distinct ids)."""
    try:
        done = subprocess.run(
            [str(python), str(BUILD_SCRIPT), str(out)],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ModelError(f"building the model folder failed: {exc}") from exc
    if done.returncode != 0:
        raise ModelError(
            f"build_model.py exited {done.returncode}: {done.stderr.strip()[-3000:]}"
            f"{done.stdout.strip()[-1000:]}"
        )
    report = json.loads(done.stdout.strip().splitlines()[-1])
    if not isinstance(report, dict):
        raise ModelError(f"build_model.py printed {done.stdout!r}")
    return report
