"""Every package builds on its own, and each library installs alone into an empty venv (with only
the narwhal libraries it declares)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LIBRARIES = {
    "narwhal-engine-client": "narwhal_engine_client",
    "narwhal-fit": "narwhal_fit",
    "narwhal-store": "narwhal_store",
}
# The narwhal libraries each one brings along: none (narwhal-store holds its own copy of the fit
# forms, docs/design.md §1).
BROUGHT: dict[str, list[str]] = {}


def _uv() -> str:
    found = os.environ.get("UV") or shutil.which("uv")
    if found:
        return found
    pinned = ROOT / ".tools" / "uv" / "bin" / "uv"
    if pinned.is_file():
        return str(pinned)
    pytest.fail("no uv: run `make setup` first")


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Build every member without workspace sources, as a release would."""
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [_uv(), "build", "--all-packages", "--no-sources", "--quiet", "-o", str(out)],
        cwd=ROOT,
        check=True,
    )
    return out


@pytest.mark.slow
def test_every_member_builds_a_wheel_and_sdist(wheels: Path) -> None:
    """`uv build --all-packages --no-sources` gives a wheel and an sdist per member."""
    names = {p.name for p in wheels.iterdir()}
    for dist in (
        "narwhal_engine_client",
        "narwhal_fit",
        "narwhal_store",
        "narwhal_profile_cli",
        "narwhal_trial",
        "narwhal_sim",
        "narwhal_report",
    ):
        assert any(n.startswith(dist + "-") and n.endswith(".whl") for n in names), dist
        assert any(n.startswith(dist + "-") and n.endswith(".tar.gz") for n in names), dist


@pytest.mark.slow
@pytest.mark.parametrize(("dist", "module"), sorted(LIBRARIES.items()))
def test_library_installs_alone(wheels: Path, tmp_path: Path, dist: str, module: str) -> None:
    """The library's wheel installs into an empty venv (no narwhal package but those it declares,
    found among the wheels just built) and imports."""
    wheel = next(wheels.glob(dist.replace("-", "_") + "-*.whl"))
    venv = tmp_path / "venv"
    subprocess.run([_uv(), "venv", "--quiet", "--python", sys.executable, str(venv)], check=True)
    python = venv / "bin" / "python"
    links = ["--find-links", str(wheels)]  # where the narwhal libraries it declares come from
    subprocess.run(
        [_uv(), "pip", "install", "--quiet", "--python", str(python), *links, str(wheel)],
        check=True,
    )
    listed = subprocess.run(
        [_uv(), "pip", "freeze", "--python", str(python)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    narwhal = [
        line.split("@")[0].split("==")[0].strip()
        for line in listed.splitlines()
        if line.startswith("narwhal")
    ]
    assert [n.replace("_", "-") for n in narwhal] == sorted([dist, *BROUGHT.get(dist, [])])
    probe = f"import {module}; print(len({module}.__all__))"
    result = subprocess.run([str(python), "-c", probe], capture_output=True, text=True, check=True)
    assert int(result.stdout) > 0
