"""The report as a person sees it: ``narwhal-report`` over a variant's profile store and trial run,
then the page in headless Chromium (the Debian ``chromium`` package): a screenshot beside the
page, the rendered DOM, and every console message (the page has no script, so any is a fault).

Chromium runs with a fresh profile, no sandbox (root in CI), no GPU, and a host resolver that
resolves nothing, so the page cannot fetch anything even if it tried.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--host-resolver-rules=MAP * ~NOTFOUND",
)
WINDOW = "1280,4000"
_CONSOLE = re.compile(r":CONSOLE[:(]")


@dataclass(frozen=True, slots=True)
class Rendered:
    """What Chromium made of the page."""

    screenshot: Path
    dom: str
    console: list[str]


def chromium() -> str | None:
    """The Chromium binary, or None when it is not installed."""
    return CHROMIUM if Path(CHROMIUM).is_file() else shutil.which("chromium")


def _chromium(binary: str, *args: str) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory(prefix="narwhal-chromium-") as profile:
        return subprocess.run(
            [binary, *FLAGS, f"--user-data-dir={profile}", *args],
            capture_output=True, text=True, timeout=180, check=False, stdin=subprocess.DEVNULL,
        )  # fmt: skip


def render(page: Path, screenshot: Path) -> Rendered:
    """Screenshot ``page`` into ``screenshot`` and dump its DOM with console logging on."""
    binary = chromium()
    if binary is None:
        raise FileNotFoundError("chromium is not installed (apt-get install chromium)")
    url = page.resolve().as_uri()
    shot = _chromium(binary, f"--screenshot={screenshot}", f"--window-size={WINDOW}", url)
    if shot.returncode != 0 or not screenshot.is_file():
        raise RuntimeError(f"chromium --screenshot exit {shot.returncode}: {shot.stderr[-800:]}")
    dump = _chromium(binary, "--enable-logging=stderr", "--v=0", "--dump-dom", url)
    if dump.returncode != 0:
        raise RuntimeError(f"chromium --dump-dom exit {dump.returncode}: {dump.stderr[-800:]}")
    console = [line for line in (shot.stderr + dump.stderr).splitlines() if _CONSOLE.search(line)]
    return Rendered(screenshot, dump.stdout, console)
