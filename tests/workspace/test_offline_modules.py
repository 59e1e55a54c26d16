"""``predict`` contacts nothing, so the predictor's modules import nothing that can.

The rule is checked twice: on the source (every ``import`` reachable inside narwhal_trial from the
predictor's modules, so a failure names the chain that brings a live module in) and at run time (a
fresh interpreter imports the modules and lists ``sys.modules``). ``narwhal_trial/__init__.py``
re-exports the live commands too, so the run-time probe imports the submodules under a bare
package object and never runs the package root.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "packages" / "narwhal-trial" / "src"
PACKAGE = "narwhal_trial"
OFFLINE = (
    "narwhal_trial.predictor._predict",
    "narwhal_trial.predictor._profile_domain",
    "narwhal_trial.predictor._vtime",
)
"""``predict`` and what it shares with ``check``; the rest of the predictor is reached from them."""
LIVE = ("narwhal_engine_client", "httpx")

_PROBE = """
import importlib, importlib.util, json, sys, types

spec = importlib.util.find_spec("narwhal_trial")
package = types.ModuleType("narwhal_trial")  # the package root, without running its __init__
package.__path__ = list(spec.submodule_search_locations)
sys.modules["narwhal_trial"] = package
for name in sys.argv[1:]:
    importlib.import_module(name)
print(json.dumps(sorted(sys.modules)))
"""


def _source(module: str) -> Path | None:
    """The file of a narwhal_trial module (a package's ``__init__.py``), None outside it."""
    if module != PACKAGE and not module.startswith(PACKAGE + "."):
        return None
    base = SRC.joinpath(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _imports(module: str, path: Path) -> set[str]:
    """Every module ``path``'s source imports, anywhere in it (a function's imports too)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1])
                name = f"{base}.{node.module}" if node.module else base
            else:
                name = node.module or ""
            found.add(name)
            # ``from narwhal_trial import _x`` imports the submodule ``_x``
            found.update(
                f"{name}.{alias.name}"
                for alias in node.names
                if _source(f"{name}.{alias.name}") is not None
            )
    return found


def _live_chains(root: str) -> list[str]:
    """Each import chain from ``root`` through narwhal_trial's modules to a LIVE module."""
    chains: list[str] = []
    seen = {root}
    todo = [(root, [root])]
    while todo:
        module, chain = todo.pop()
        path = _source(module)
        assert path is not None, f"{module} is not a narwhal_trial module"
        for name in sorted(_imports(module, path)):
            if name.split(".")[0] in LIVE:
                chains.append(" -> ".join([*chain, name]))
            elif _source(name) is not None and name not in seen:
                seen.add(name)
                todo.append((name, [*chain, name]))
    return chains


def _loaded_after_importing(*modules: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *modules],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    loaded: list[str] = json.loads(done.stdout)
    return loaded


def _live(loaded: list[str]) -> list[str]:
    return sorted({name.split(".")[0] for name in loaded} & set(LIVE))


@pytest.mark.parametrize("module", OFFLINE)
def test_offline_sources_import_nothing_live(module: str) -> None:
    """No import reachable from the predictor's modules inside narwhal_trial is a live one."""
    chains = _live_chains(module)
    assert not chains, (
        f"{module} must contact nothing, but reaches a live module ({' or '.join(LIVE)}) "
        "through:\n" + "\n".join(chains)
    )


def test_offline_modules_load_nothing_live() -> None:
    """A fresh interpreter importing the predictor's modules has no engine client and no httpx."""
    loaded = _loaded_after_importing(*OFFLINE)
    assert set(OFFLINE) <= set(loaded)
    assert f"{PACKAGE}.run._trial" not in loaded  # the package root (which imports run) never ran
    live = _live(loaded)
    assert not live, f"importing {', '.join(OFFLINE)} loaded live modules: {', '.join(live)}"


def test_the_probes_see_a_live_module() -> None:
    """Both checks do find one where there is one: ``check`` contacts the engines."""
    assert any(
        chain.endswith("narwhal_engine_client")
        for chain in _live_chains(f"{PACKAGE}.checks._check")
    )
    assert "narwhal_engine_client" in _live(_loaded_after_importing(f"{PACKAGE}.checks._check"))
