"""``docs/code-map.md``: where each thing lives, built from the packages' own docstrings.

Per package and sub-package, its ``__init__`` docstring's first paragraph, then one row per module
with its docstring's first paragraph: the map says what the code says of itself, so it cannot
drift from it. ``python -m tools.code_map --write`` rewrites the file;
``tests/workspace/test_code_map.py`` fails when it is stale.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "code-map.md"

HEADER = """# Code map

Where each thing lives, package by package and module by module, in the code's own words: every
entry is the first paragraph of that module's docstring. To change a behaviour, find the module
whose sentence names it; to add one, put it beside the modules of the same layer (CONTRIBUTING.md,
"Layout and layering"). Written by `python -m tools.code_map --write`;
`tests/workspace/test_code_map.py` fails when it is stale, so change the docstring, not this page.
"""


def first_paragraph(path: Path) -> str:
    """The first paragraph of ``path``'s module docstring, on one line (``|`` escaped)."""
    doc = ast.get_docstring(ast.parse(path.read_text(), filename=str(path))) or ""
    paragraph = doc.strip().split("\n\n", 1)[0]
    return " ".join(paragraph.split()).replace("|", "\\|")


def _folder(folder: Path, src: Path, level: int) -> list[str]:
    """The section of one package or sub-package folder, then its sub-packages'."""
    name = ".".join(folder.relative_to(src).parts)
    lines = [f"{'#' * level} `{name}` (`{folder.relative_to(ROOT)}/`)", ""]
    init = folder / "__init__.py"
    if init.is_file():
        lines += [first_paragraph(init), ""]
    modules = sorted(p for p in folder.glob("*.py") if p.name != "__init__.py")
    if modules:
        lines += ["| module | what it holds |", "| --- | --- |"]
        lines += [f"| `{p.name}` | {first_paragraph(p)} |" for p in modules]
        lines.append("")
    for sub in sorted(p for p in folder.iterdir() if (p / "__init__.py").is_file()):
        lines += _folder(sub, src, level + 1)
    return lines


def render() -> str:
    """The whole page."""
    lines = [HEADER]
    for package in sorted((ROOT / "packages").iterdir()):
        src = package / "src"
        for module in sorted(p for p in src.iterdir() if (p / "__init__.py").is_file()):
            lines.append(f"## {package.name}")
            lines.append("")
            lines += _folder(module, src, 3)
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    """Print the page, or write it with ``--write``."""
    parser = argparse.ArgumentParser(prog="python -m tools.code_map", description=__doc__)
    parser.add_argument("--write", action="store_true", help=f"write {OUT.relative_to(ROOT)}")
    args = parser.parse_args(argv)
    text = render()
    if args.write:
        OUT.write_text(text)
        print(f"wrote {OUT.relative_to(ROOT)}")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
