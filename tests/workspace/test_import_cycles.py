"""Imports point one way: no module of a workspace package imports, directly or through others,
a module that imports it back, and no sub-package does so to another. Function-level (lazy)
imports count; imports under ``if TYPE_CHECKING:`` do not, since they never run."""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

import pytest

from .test_workspace_layout import PACKAGES, ROOT


def _module_name(path: Path, src: Path) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


class _Imports(ast.NodeVisitor):
    """What one module imports, as module names (``from pkg import sub`` names ``pkg.sub``)."""

    def __init__(self, name: str, is_package: bool, known: set[str]) -> None:
        self.name, self.is_package, self.known = name, is_package, known
        self.found: set[str] = set()

    def visit_If(self, node: ast.If) -> None:
        test = node.test
        if (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
            isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
        ):
            for child in node.orelse:
                self.visit(child)
            return
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        self.found.update(alias.name for alias in node.names)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            base = self.name.split(".") if self.is_package else self.name.split(".")[:-1]
            base = base[: len(base) - (node.level - 1)]
            module = ".".join([*base, *([node.module] if node.module else [])])
        else:
            module = node.module or ""
        for alias in node.names:
            sub = f"{module}.{alias.name}"
            self.found.add(sub if sub in self.known else module)


def import_graph(module: str) -> dict[str, set[str]]:
    """Every module of the top-level package ``module`` and the modules of it that it imports."""
    src = next((ROOT / "packages").glob(f"*/src/{module}")).parent
    paths = sorted((src / module).rglob("*.py"))
    names = {_module_name(p, src): p for p in paths}
    graph = {}
    for name, path in names.items():
        visitor = _Imports(name, path.name == "__init__.py", set(names))
        visitor.visit(ast.parse(path.read_text(), filename=str(path)))
        graph[name] = {m for m in visitor.found if m in names and m != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(graph[node]):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _collapsed(graph: dict[str, set[str]], top: str) -> dict[str, set[str]]:
    """The graph of ``top``'s sub-packages (a module directly in ``top`` stays itself)."""

    def owner(name: str) -> str:
        parts = name.split(".")
        return ".".join(parts[:2]) if len(parts) > 2 else name

    out: dict[str, set[str]] = {}
    for name, targets in graph.items():
        if name == top:
            continue
        mine = owner(name)
        out.setdefault(mine, set()).update(owner(t) for t in targets if t != top)
    for name in out:
        out[name].discard(name)
    return out


@pytest.mark.parametrize("module", sorted(PACKAGES.values()))
def test_no_module_imports_itself_back(module: str) -> None:
    """No cycle between the modules of one package."""
    assert cycles(import_graph(module)) == []


@pytest.mark.parametrize("module", sorted(PACKAGES.values()))
def test_no_sub_package_imports_itself_back(module: str) -> None:
    """No cycle between a package's sub-packages (and its top-level modules)."""
    assert cycles(_collapsed(import_graph(module), module)) == []


def _edges(pairs: Iterable[tuple[str, str]]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for a, b in pairs:
        graph.setdefault(a, set()).add(b)
        graph.setdefault(b, set())
    return graph


def test_the_check_finds_a_cycle_it_is_shown() -> None:
    """Not vacuous: a lazy import back, and a cycle through a third module, are found."""
    assert cycles(_edges([("a", "b"), ("b", "a"), ("b", "c")])) == [["a", "b"]]
    assert cycles(_edges([("a", "b"), ("b", "c"), ("c", "a")])) == [["a", "b", "c"]]
    assert cycles(_edges([("a", "b"), ("b", "c")])) == []
    tree = ast.parse("def f():\n    from pkg import a\nif TYPE_CHECKING:\n    from pkg import c\n")
    visitor = _Imports("pkg.b", False, {"pkg.a", "pkg.b", "pkg.c"})
    visitor.visit(tree)
    assert visitor.found == {"pkg.a"}
