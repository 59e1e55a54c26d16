"""The uv the Makefile uses, for the tiers that build wheels outside ``make``.

``$UV`` (the Makefile passes its own), else ``uv`` on PATH, else the pinned copy ``make setup``
installs into ``.tools/uv/bin/uv``.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def find_uv() -> Path:
    """The uv binary; FileNotFoundError naming what was looked for when there is none."""
    given = os.environ.get("UV", "").strip() or shutil.which("uv")
    found = Path(given) if given else REPO / ".tools" / "uv" / "bin" / "uv"
    if not found.is_file():
        raise FileNotFoundError(
            f"no uv: {found} is missing (make setup installs it into .tools/uv)"
        )
    return found.resolve()
