"""docs/code-map.md is the map the packages' docstrings make (python -m tools.code_map --write)."""

from __future__ import annotations

from types import ModuleType

import pytest

from .test_workspace_layout import ROOT


@pytest.fixture
def code_map(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """``tools.code_map`` (the repo root is on sys.path only inside this fixture)."""
    monkeypatch.syspath_prepend(str(ROOT))
    import tools.code_map as module

    return module


def test_the_code_map_is_current(code_map: ModuleType) -> None:
    """The checked-in page has exactly the bytes the docstrings give now."""
    assert code_map.OUT.read_text() == code_map.render(), (
        "docs/code-map.md is stale: python -m tools.code_map --write"
    )


def test_every_module_is_on_the_map_with_words(code_map: ModuleType) -> None:
    """Every module of every package has a row, and every row says something."""
    page = code_map.OUT.read_text()
    for path in sorted((ROOT / "packages").glob("*/src/**/*.py")):
        if path.name == "__init__.py":
            continue
        words = code_map.first_paragraph(path)
        assert words, f"{path} has no docstring"
        assert f"| `{path.name}` | {words} |" in page, path
