"""docs/code-map.md is the map the packages' docstrings make (python -m tools.code_map --write)."""

from __future__ import annotations

from tools.code_map import OUT, first_paragraph, render

from .test_workspace_layout import ROOT


def test_the_code_map_is_current() -> None:
    """The checked-in page has exactly the bytes the docstrings give now."""
    assert OUT.read_text() == render(), (
        "docs/code-map.md is stale: python -m tools.code_map --write"
    )


def test_every_module_is_on_the_map_with_words() -> None:
    """Every module of every package has a row, and every row says something."""
    page = OUT.read_text()
    for path in sorted((ROOT / "packages").glob("*/src/**/*.py")):
        if path.name == "__init__.py":
            continue
        assert f"| `{path.name}` | {first_paragraph(path)} |" in page, path
        assert first_paragraph(path), f"{path} has no docstring"
