"""The workspace keeps the layout docs/design.md §1 describes."""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = {
    "narwhal-engine-client": "narwhal_engine_client",
    "narwhal-fit": "narwhal_fit",
    "narwhal-store": "narwhal_store",
    "narwhal-profile-cli": "narwhal_profile_cli",
    "narwhal-trial": "narwhal_trial",
    "narwhal-sim": "narwhal_sim",
    "narwhal-report": "narwhal_report",
}
# Dependencies each package may declare (docs/design.md §1): the libraries install alone with
# only these; the commands' lists keep the package diagram, the README's table and
# docs/interfaces.md honest (tests/workspace/test_dependency_facts.py reads them from here).
ALLOWED_DEPENDENCIES = {
    "narwhal-engine-client": {"httpx", "prometheus-client"},
    "narwhal-fit": {"numpy", "scipy"},
    "narwhal-store": {"pydantic", "orjson"},
    "narwhal-profile-cli": {
        "narwhal-engine-client",
        "narwhal-fit",
        "narwhal-store",
        "orjson",
        "typer",
    },
    "narwhal-trial": {
        "narwhal-engine-client",
        "narwhal-fit",
        "narwhal-store",
        "numpy",
        "orjson",
        "pydantic",
        "typer",
    },
    "narwhal-report": {"narwhal-store", "narwhal-trial", "matplotlib", "numpy", "typer"},
    "narwhal-sim": {"narwhal-store", "orjson", "typer"},
}


def _pyproject(path: Path) -> dict[str, object]:
    return tomllib.loads(path.read_text())


def _dep_name(requirement: str) -> str:
    match = re.match(r"[A-Za-z0-9._-]+", requirement)
    assert match is not None, requirement
    return match.group(0).lower()


def test_root_is_a_virtual_workspace() -> None:
    """The root pyproject has no [project] table and lists packages/* as members."""
    root = _pyproject(ROOT / "pyproject.toml")
    assert "project" not in root
    assert root["tool"]["uv"]["workspace"]["members"] == ["packages/*"]  # type: ignore[index]
    assert (ROOT / "uv.lock").is_file()


def test_exactly_the_seven_members_exist() -> None:
    """packages/ holds the seven members docs/design.md §1 names and nothing else."""
    found = {p.name for p in (ROOT / "packages").iterdir() if (p / "pyproject.toml").is_file()}
    assert found == set(PACKAGES)


@pytest.mark.parametrize(("dist", "module"), sorted(PACKAGES.items()))
def test_member_layout(dist: str, module: str) -> None:
    """Each member has its own version, README, src layout and py.typed."""
    base = ROOT / "packages" / dist
    project = _pyproject(base / "pyproject.toml")["project"]
    assert isinstance(project, dict)
    assert project["name"] == dist
    assert re.fullmatch(r"\d+\.\d+\.\d+", project["version"])
    assert project["requires-python"] == ">=3.11"
    assert len((base / "README.md").read_text().strip().splitlines()) > 3
    assert (base / "src" / module / "py.typed").is_file()
    assert (base / "src" / module / "__init__.py").is_file()


def _ruf022_key(name: str) -> tuple[int, str]:
    """ruff RUF022's isort-style order: CONSTANTS, then Classes, then everything else."""
    if name.isupper():
        return (0, name)
    return (1, name) if name[:1].isupper() else (2, name)


@pytest.mark.parametrize(("dist", "module"), sorted(PACKAGES.items()))
def test_public_api_is_a_sorted_all(dist: str, module: str) -> None:
    """__init__ exports a sorted __all__ whose names all resolve."""
    mod = importlib.import_module(module)
    names = list(mod.__all__)
    assert names == sorted(names, key=_ruf022_key), f"{dist}: __all__ is not sorted"
    assert len(set(names)) == len(names)
    for name in names:
        assert hasattr(mod, name), f"{dist}: __all__ names missing {name}"


@pytest.mark.parametrize(("dist", "module"), sorted(PACKAGES.items()))
def test_internal_dependencies_are_ranges_wired_to_the_workspace(dist: str, module: str) -> None:
    """Internal dependencies use version ranges and `{ workspace = true }` sources."""
    data = _pyproject(ROOT / "packages" / dist / "pyproject.toml")
    deps: list[str] = data["project"]["dependencies"]  # type: ignore[index]
    internal = [d for d in deps if _dep_name(d) in PACKAGES]
    sources = data.get("tool", {}).get("uv", {}).get("sources", {})  # type: ignore[union-attr]
    for dep in internal:
        assert ">=" in dep and "<" in dep, f"{dist}: {dep} is not a range"
        assert sources[_dep_name(dep)] == {"workspace": True}


@pytest.mark.parametrize("dist", sorted(ALLOWED_DEPENDENCIES))
def test_libraries_declare_only_their_stated_dependencies(dist: str) -> None:
    """Every package declares exactly the dependencies the table allows it."""
    data = _pyproject(ROOT / "packages" / dist / "pyproject.toml")
    names = {_dep_name(d) for d in data["project"]["dependencies"]}  # type: ignore[index]
    assert names == ALLOWED_DEPENDENCIES[dist]


def test_every_package_has_an_allowed_dependency_list() -> None:
    """No package is left out of the table."""
    assert set(ALLOWED_DEPENDENCIES) == set(PACKAGES)


def _imported_modules(src: Path) -> set[str]:
    found: set[str] = set()
    for path in src.rglob("*.py"):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module.split(".")[0])
    return found


@pytest.mark.parametrize(("dist", "module"), sorted(PACKAGES.items()))
def test_dependency_direction(dist: str, module: str) -> None:
    """Libraries never import CLIs, the report or the simulator; fit and store never import
    httpx nor each other (the store holds its own copy of the fit forms); store never imports
    numpy or scipy."""
    imported = _imported_modules(ROOT / "packages" / dist / "src")
    if dist != "narwhal-sim":
        assert "narwhal_sim" not in imported
    # narwhal-report reads the trial's record models (docs/design.md §1); nothing imports it
    commands = {"narwhal_profile_cli", "narwhal_report"} | (
        set() if dist == "narwhal-report" else {"narwhal_trial"}
    )
    assert not imported & commands - {module}
    if dist in {"narwhal-fit", "narwhal-store"}:
        assert "httpx" not in imported
        assert not imported & {"narwhal_engine_client", "narwhal_fit", "narwhal_store"} - {module}
    if dist == "narwhal-store":
        assert not imported & {"numpy", "scipy"}
    if dist == "narwhal-engine-client":
        assert not imported & {"narwhal_fit", "narwhal_store", "pydantic", "numpy"}


def test_importing_the_store_loads_no_numerical_library() -> None:
    """``import narwhal_store`` loads neither numpy nor scipy, nor narwhal-fit."""
    probe = (
        "import sys, narwhal_store; "
        "print(sorted({'numpy', 'scipy', 'narwhal_fit'} & set(sys.modules)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "[]", done.stdout
