"""The docs say what each package depends on, as its pyproject.toml declares it: the package
diagram of docs/design.md §1, the README's package table and the dependency paragraph of
docs/interfaces.md name every narwhal package each one depends on, and no other."""

from __future__ import annotations

import re

import pytest

from .test_workspace_layout import ALLOWED_DEPENDENCIES, ROOT

#: How the README's table and docs/interfaces.md shorten each package's name.
SHORT = {
    "narwhal-engine-client": ("engine client", "engine-client"),
    "narwhal-fit": ("fit",),
    "narwhal-store": ("store",),
    "narwhal-trial": ("trial",),
}


def _narwhal(dist: str) -> set[str]:
    return {d for d in ALLOWED_DEPENDENCIES[dist] if d.startswith("narwhal-")}


def _named(text: str) -> set[str]:
    """The narwhal packages ``text`` names by a short name."""
    return {
        dist
        for dist, names in SHORT.items()
        if any(re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", text) for n in names)
    }


def _diagram() -> dict[str, str]:
    """Per package, the text of its entry in the design's package diagram."""
    text = (ROOT / "docs" / "design.md").read_text()
    section = text.split("## 1. Packages", 1)[1]
    block = section.split("```", 2)[1]
    entries: dict[str, str] = {}
    current = None
    for line in block.splitlines():
        found = re.match(r"(narwhal-[a-z-]+) ", line)
        if found:
            current = found.group(1)
            entries[current] = ""
        if current is not None:
            entries[current] += line.split(" ", 1)[1] if found else line
            entries[current] += "\n"
    return entries


@pytest.mark.parametrize("dist", sorted(ALLOWED_DEPENDENCIES))
def test_the_package_diagram_names_each_dependency(dist: str) -> None:
    """Each package's entry in the diagram (its arrows and continuation lines) names each narwhal
    package it depends on; the store's and the fit's entries name none."""
    entries = _diagram()
    entry = entries.get(dist, "")
    for dependency in _narwhal(dist):
        assert dependency in entry, f"docs/design.md §1: {dist} does not name {dependency}"
    if not _narwhal(dist) and dist in entries:
        first = entry.split("►", 1)[-1].split("\n", 1)[0]
        assert "narwhal-" not in first, f"docs/design.md §1: {dist} names {first}"


def _readme_rows() -> dict[str, str]:
    rows = {}
    for line in (ROOT / "README.md").read_text().splitlines():
        found = re.match(r"\| \[`(narwhal-[a-z-]+)`\]\([^)]*\) \|[^|]*\|([^|]*)\|", line)
        if found:
            rows[found.group(1)] = found.group(2)
    return rows


@pytest.mark.parametrize("dist", sorted(ALLOWED_DEPENDENCIES))
def test_the_readme_table_names_exactly_the_dependencies(dist: str) -> None:
    """The README's "depends on" column names exactly the narwhal packages a package depends on."""
    rows = _readme_rows()
    assert dist in rows, f"README.md: no row for {dist}"
    assert _named(rows[dist]) == _narwhal(dist), f"README.md row of {dist}: {rows[dist]!r}"


def test_the_interfaces_paragraph_names_exactly_the_dependencies() -> None:
    """docs/interfaces.md's "`narwhal-X → a, b`" spans name exactly each package's narwhal
    dependencies, for every package that has any."""
    text = (ROOT / "docs" / "interfaces.md").read_text()
    spans = {
        f"narwhal-{m.group(1)}": m.group(2)
        for m in re.finditer(r"`narwhal-([a-z-]+) → ([^`]+)`", text)
    }
    for dist in ALLOWED_DEPENDENCIES:
        if _narwhal(dist):
            assert dist in spans, f"docs/interfaces.md: no `{dist} → …`"
            assert _named(spans[dist]) == _narwhal(dist), (dist, spans[dist])
