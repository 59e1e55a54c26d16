"""Inside a package split into sub-packages, imports go one way: each sub-package imports only the
package's foundations (its top-level modules that a sub-package uses) and the sub-packages below it;
foundations import no sub-package. ``LAYERS`` is the order, lowest first; a tuple holds peers,
which import neither each other nor anything above them. Lazy imports count, as in
``test_import_cycles``. The public surfaces (``__init__``, ``__main__``, ``schemas``) sit above
every layer, so they are free to import any of them."""

from __future__ import annotations

import pytest

from .test_import_cycles import import_graph
from .test_workspace_layout import ROOT

LAYERS: dict[str, list[str | tuple[str, ...]]] = {
    "narwhal_trial": [
        "documents",
        "server",
        "workload",
        "run",
        "predictor",
        ("edge", "checks"),
        "compare",
        "cli",
    ],
    "narwhal_profile_cli": ["sweeps", "results"],
    "narwhal_report": ["compare"],
    "narwhal_sim": ["model", "engine", "router"],
}
"""Each split package's sub-packages, lowest layer first."""


def _rank(layers: list[str | tuple[str, ...]]) -> dict[str, int]:
    rank: dict[str, int] = {}
    for i, entry in enumerate(layers):
        for name in (entry,) if isinstance(entry, str) else entry:
            rank[name] = i
    return rank


def violations(
    top: str, graph: dict[str, set[str]], layers: list[str | tuple[str, ...]]
) -> list[str]:
    """Every import that breaks the layering of ``top``, as ``importer -> imported (why)``."""
    rank = _rank(layers)

    def layer(name: str) -> str | None:
        parts = name.split(".")
        return parts[1] if len(parts) > 2 or (len(parts) == 2 and parts[1] in rank) else None

    foundations = {t for n, ts in graph.items() if layer(n) for t in ts if layer(t) is None}
    found: list[str] = []
    for name, targets in sorted(graph.items()):
        mine = layer(name)
        for target in sorted(targets):
            theirs = layer(target)
            if mine is None:
                if name in foundations and theirs is not None:
                    found.append(f"{name} -> {target} (a foundation imports a layer)")
            elif theirs is None or theirs == mine:
                continue
            elif theirs not in rank or mine not in rank:
                found.append(f"{name} -> {target} (a sub-package LAYERS does not list)")
            elif rank[theirs] >= rank[mine]:
                found.append(f"{name} -> {target} ({theirs} is not below {mine})")
    return found


@pytest.mark.parametrize("top", sorted(LAYERS))
def test_every_layer_is_listed(top: str) -> None:
    """Each sub-package folder of a split package has its place in the order."""
    src = next((ROOT / "packages").glob(f"*/src/{top}"))
    folders = {p.parent.name for p in src.glob("*/__init__.py")}
    assert folders == set(_rank(LAYERS[top]))


@pytest.mark.parametrize("top", sorted(LAYERS))
def test_imports_go_down_the_layers(top: str) -> None:
    """No sub-package imports one above it or a peer, and no foundation imports a layer."""
    assert violations(top, import_graph(top), LAYERS[top]) == []


def test_the_check_finds_an_upward_import() -> None:
    """Not vacuous: an import upwards, between peers, from a foundation, and from an unlisted
    sub-package are each found; imports down and within a layer are not."""
    graph = {
        "p": {"p.a._x"},
        "p._found": set(),
        "p.a._x": {"p._found", "p.a._y"},
        "p.a._y": {"p.b._z"},
        "p.b._z": {"p.a._x", "p._found"},
        "p.c._w": {"p.b._z"},
        "p.d._v": {"p.c._w"},
        "p._bad": {"p.a._x"},
        "p.a._u": {"p._bad"},
    }
    assert violations("p", graph, ["a", "b", ("c", "d")]) == [
        "p._bad -> p.a._x (a foundation imports a layer)",
        "p.a._y -> p.b._z (b is not below a)",
        "p.d._v -> p.c._w (c is not below d)",
    ]
    assert violations("p", {"p.e._t": {"p.a._x"}, "p.a._x": set()}, ["a"]) == [
        "p.e._t -> p.a._x (a sub-package LAYERS does not list)"
    ]
