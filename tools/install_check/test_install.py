"""Every install block of the READMEs, run exactly as written outside the workspace, then what it
installed checked from inside: the module comes from that venv (never from the checkout), exactly
the narwhal wheels it needs came from ``dist/`` files (never from an index), and each command
answers ``--help``, ``--version``, ``python -m MODULE --help`` and one real command against the
simulator, from an empty folder.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from ._blocks import Install, collect, distinct
from ._checkout import Checkout
from ._commands import CLIS, MODULES, REAL_COMMANDS, check_command
from ._env import REPO, activated, clean_env, make_venv, run_block
from ._installed import Installed, inside, url_path
from ._services import Services
from ._wheels import narwhal_closure

INSTALLS = [i for i in distinct(collect(REPO)) if i.first.kind != "build"]


def test_the_build_block_writes_one_wheel_per_member(checkout: Checkout) -> None:
    """The README's build line, run in a copy of the checkout, fills ``dist/`` with one wheel of
    each of the seven members."""
    assert sorted(checkout.wheels) == sorted(MODULES), sorted(checkout.wheels)
    for name, wheel in checkout.wheels.items():
        assert wheel.path.parent == checkout.dist, (name, wheel.path)


def test_there_are_install_blocks_for_every_member() -> None:
    """The tier has something to run: a pip block per member, a uv-tool block per command."""
    targets = {(i.first.kind, i.first.target) for i in INSTALLS}
    assert {("pip", dist) for dist in MODULES} <= targets, sorted(targets)
    assert {("uv-tool", dist) for dist in CLIS} <= targets, sorted(targets)


def _install(install: Install, checkout: Checkout, folder: Path) -> Installed:
    """Run the block: pip lines in a fresh venv (activated: its bin first on PATH), uv tool lines
    with private tool folders; the block's folder is the checkout copy holding ``dist/``."""
    block = install.first
    assert block.dist is not None
    log = folder / "install.log"
    work = folder / "work"
    work.mkdir()
    if block.kind == "pip":
        venv = make_venv(folder / "venv", clean_env([], checkout.uv_dir), log)
        env = activated(venv, checkout.uv_dir)
        run_block(block.text, checkout.root, env, log)
        return Installed(python=venv / "bin" / "python", bin=venv / "bin", env=env, work=work)
    tools, bin_dir = folder / "uv-tools", folder / "uv-bin"
    env = clean_env(
        [bin_dir], checkout.uv_dir, UV_TOOL_DIR=str(tools), UV_TOOL_BIN_DIR=str(bin_dir)
    )
    run_block(block.text, checkout.root, env, log)
    python = tools / block.dist / "bin" / "python"
    return Installed(python=python, bin=bin_dir, env=env, work=work)


@pytest.mark.parametrize("install", INSTALLS, ids=Install.ident)
def test_install_block(
    install: Install, checkout: Checkout, services: Services, tmp_path: Path, timings: list[str]
) -> None:
    """The block installs its target alone, from the wheel files, and the target works."""
    block = install.first
    assert block.dist is not None
    where = ", ".join(b.where(REPO) for b in install.blocks)
    started = time.monotonic()
    installed = _install(install, checkout, tmp_path)
    installed_s = time.monotonic() - started

    wheel = checkout.wheels[block.dist]
    expected = narwhal_closure(checkout.wheels, block.dist)
    extra_names = list(wheel.extras.get(block.extra, ())) if block.extra else []
    assert not block.extra or extra_names, f"{where}: {block.dist} has no extra {block.extra}"
    module = MODULES[block.dist]
    report = installed.probe(module, extra_names)

    prefix = Path(report["prefix"]).resolve()
    assert prefix == installed.python.parent.parent.resolve(), (where, prefix)
    assert inside(Path(report["file"]), prefix), (where, report["file"], prefix)
    leaked = [
        p for p in report["path"] if p and (inside(Path(p), REPO) or inside(Path(p), checkout.root))
    ]
    assert leaked == [], f"{where}: sys.path holds the checkout: {leaked}"
    assert report["exported"] > 0, f"{where}: {module}.__all__ is empty"

    assert set(report["narwhal"]) == expected, (where, sorted(report["narwhal"]), sorted(expected))
    for name, found in report["narwhal"].items():
        built = checkout.wheels[name]
        assert found["version"] == built.version, (where, name, found)
        assert url_path(found["url"]) == built.path.resolve(), (
            f"{where}: {name} did not come from {built.path}: {found['url']}"
        )
    missing = [name for name, version in report["extras"].items() if version is None]
    assert missing == [], f"{where}: the {block.extra} extra did not bring {missing}"

    cli = CLIS.get(block.dist)
    if cli is not None:
        assert report["narwhal"][block.dist]["scripts"] == [cli.command], (where, report)
        check_command(installed, cli, module, wheel.version)
        real = REAL_COMMANDS.get(block.target) or REAL_COMMANDS[block.dist]
        versions = {name: checkout.wheels[name].version for name in expected}
        real(installed, services, versions)
    timings.append(
        f"{install.ident()}: installed in {installed_s:.1f} s, checked in "
        f"{time.monotonic() - started - installed_s:.1f} s ({where})"
    )
