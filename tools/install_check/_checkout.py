"""The checkout copied out of the workspace, with the README's build line run in it: where every
install block runs (its ``dist/``), the folder that holds only ``uv``, and the built wheels.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ..makefile_uv import find_uv
from ._blocks import collect
from ._env import REPO, clean_env, run_block, uv_folder
from ._wheels import Wheel, read_wheels


@dataclass(frozen=True)
class Checkout:
    """A copy of the checkout whose ``dist/`` the build block filled: the README lines run in
    ``root``; ``uv_dir`` holds only ``uv``; ``wheels`` by distribution name."""

    root: Path
    uv_dir: Path
    wheels: dict[str, Wheel]
    log: Path

    @property
    def dist(self) -> Path:
        """The folder the build block wrote."""
        return self.root / "dist"


def checkout_files() -> list[str]:
    """The checkout's files as a clone with these changes would hold them (tracked and untracked,
    not ignored; deleted files left out)."""
    listed = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        check=True,
    ).stdout.decode()
    return sorted({name for name in listed.split("\0") if name and (REPO / name).is_file()})


def copy_checkout(target: Path) -> Path:
    """Copy the checkout's files to ``target`` (not ``.venv``, ``dist``, caches: git ignores
    them)."""
    for name in checkout_files():
        destination = target / name
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, destination)
    return target


def build_checkout(base: Path) -> Checkout:
    """Copy the checkout into ``base/narwhal`` and run the README's build block there (one text,
    however many READMEs show it), with uv from a folder of its own on a clean PATH."""
    root = copy_checkout(base / "narwhal")
    if (root / "dist").exists():
        raise AssertionError(f"{root / 'dist'} was copied: it must be built here")
    builds = {block.text for block in collect(REPO) if block.kind == "build"}
    if len(builds) != 1:
        raise AssertionError(f"expected one build block text, found {len(builds)}")
    uv_dir = uv_folder(base / "uv-bin", find_uv())
    log = base / "build.log"
    run_block(builds.pop(), root, clean_env([], uv_dir), log)
    return Checkout(root=root, uv_dir=uv_dir, wheels=read_wheels(root / "dist"), log=log)
