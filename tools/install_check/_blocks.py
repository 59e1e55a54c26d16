"""The install blocks of the READMEs: an HTML comment that names what a ```sh block installs.

A block is the comment on its own line, then a ```sh fence on the very next line::

    <!-- install: build -->              uv build ...       (the wheels into dist/)
    <!-- install: pip DIST -->           pip install ...    (into the active venv)
    <!-- install: pip DIST[EXTRA] -->    pip install ...    (the same, with an extra)
    <!-- install: uv-tool DIST -->       uv tool install ...

Every line of a block (backslash continuations joined) must start with the command of its kind.
``collect(root)`` reads the READMEs the convention covers (``README.md``, ``packages/*/README.md``,
``docs/*.md``, ``examples/**/*.md``) and raises ``BlockError`` for a marker that does not parse, a
marker without its fence, a line of the wrong command, build blocks that differ, or (in the root
and package READMEs) a ```sh block with install lines and no marker. ``distinct(blocks)`` merges
blocks of the same kind, target and text (the install tier runs each once).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

Kind = Literal["build", "pip", "uv-tool"]
KINDS: dict[str, Kind] = {"build": "build", "pip": "pip", "uv-tool": "uv-tool"}
#: What every logical line of a block of each kind starts with.
COMMANDS: dict[Kind, str] = {
    "build": "uv build ",
    "pip": "pip install ",
    "uv-tool": "uv tool install ",
}
MARKER = re.compile(
    r"<!-- install: (?P<kind>[a-z-]+)"
    r"(?: (?P<dist>narwhal-[a-z]+(?:-[a-z]+)*)(?:\[(?P<extra>[a-z0-9][a-z0-9-]*)\])?)? -->"
)
FENCE = "```sh"
#: A narwhal wheel named as a file under ``dist/`` (the group is the distribution, with ``_``).
WHEEL_FILE = re.compile(r"\bdist/(narwhal_[a-z0-9_]+)-[^\s'\"\[/]*\.whl")
#: Lines that make an unmarked ```sh block an install block (which must then be marked).
_INSTALL_LINE = re.compile(r"^(?:uv )?(?:pip3? install|uv tool install|uv build)\b")


class BlockError(Exception):
    """A README breaks the install-block convention (the message names the file and line)."""


@dataclass(frozen=True)
class Block:
    """One marked ```sh block: where it is, what it installs, and its text as written."""

    source: Path
    line: int  # 1-based line of the marker
    kind: Kind
    dist: str | None  # None for build blocks
    extra: str | None
    text: str  # the lines between the fences, newline-terminated

    @property
    def target(self) -> str:
        """``build``, ``DIST`` or ``DIST[EXTRA]``."""
        if self.dist is None:
            return "build"
        return f"{self.dist}[{self.extra}]" if self.extra else self.dist

    def where(self, root: Path) -> str:
        """``path:line`` relative to ``root``."""
        return f"{self.source.relative_to(root)}:{self.line}"


@dataclass(frozen=True)
class Install:
    """Blocks of one kind and target with the same text: run once, found in ``blocks``."""

    blocks: tuple[Block, ...]

    @property
    def first(self) -> Block:
        """The first of the identical blocks."""
        return self.blocks[0]

    def ident(self) -> str:
        """A test id: ``KIND:TARGET``."""
        return f"{self.first.kind}:{self.first.target}"


def readme_paths(root: Path) -> list[Path]:
    """The Markdown files the convention covers, sorted."""
    found = [root / "README.md", *root.glob("packages/*/README.md"), *root.glob("docs/*.md")]
    found += root.glob("examples/**/*.md")
    return sorted(p for p in found if p.is_file())


def _is_readme(root: Path, path: Path) -> bool:
    """The root README and the package READMEs, where every install line must be marked (docs
    and examples may show other recipes, such as an image's)."""
    return path == root / "README.md" or path.parent.parent == root / "packages"


def logical_lines(text: str) -> list[str]:
    """The block's commands: backslash continuations joined, blank lines dropped."""
    joined = re.sub(r"\\\n\s*", " ", text)
    return [line.strip() for line in joined.splitlines() if line.strip()]


def parse(path: Path, text: str, *, strict: bool = True) -> list[Block]:
    """The marked blocks of one file (``BlockError`` for a broken one); ``strict``: a ```sh
    block with install lines and no marker is refused too."""
    lines = text.splitlines()
    blocks: list[Block] = []
    index = 0
    fence_open: str | None = None
    while index < len(lines):
        line = lines[index]
        stripped = line.strip()
        if fence_open is not None:
            if stripped.startswith("```"):
                fence_open = None
            index += 1
            continue
        if stripped.startswith("<!-- install"):
            blocks.append(_marked(path, lines, index))
            index += 2 + len(blocks[-1].text.splitlines()) + 1
            continue
        if stripped.startswith("```"):
            if strict and stripped in (FENCE, "```bash", "```shell"):
                _refuse_unmarked(path, lines, index)
            fence_open = stripped
        index += 1
    return blocks


def _marked(path: Path, lines: Sequence[str], index: int) -> Block:
    where = f"{path}:{index + 1}"
    match = MARKER.fullmatch(lines[index].strip())
    if match is None:
        raise BlockError(f"{where}: not an install marker: {lines[index].strip()!r}")
    kind = KINDS.get(match["kind"])
    if kind is None:
        raise BlockError(
            f"{where}: unknown install kind {match['kind']!r} (use {', '.join(KINDS)})"
        )
    if (kind == "build") != (match["dist"] is None):
        raise BlockError(f"{where}: a build marker names no package; pip and uv-tool name one")
    if index + 1 >= len(lines) or lines[index + 1].strip() != FENCE:
        raise BlockError(f"{where}: the marker must be followed by a {FENCE} fence")
    body: list[str] = []
    end = index + 2
    while end < len(lines) and lines[end].strip() != "```":
        body.append(lines[end])
        end += 1
    if end >= len(lines):
        raise BlockError(f"{where}: the {FENCE} block is never closed")
    text = "".join(line + "\n" for line in body)
    block = Block(path, index + 1, kind, match["dist"], match["extra"], text)
    commands = logical_lines(text)
    if not commands:
        raise BlockError(f"{where}: the block is empty")
    for command in commands:
        if not command.startswith(COMMANDS[block.kind]):
            raise BlockError(
                f"{where}: a {kind} block holds only `{COMMANDS[block.kind].strip()}` lines, "
                f"not {command!r}"
            )
    return block


def _refuse_unmarked(path: Path, lines: Sequence[str], index: int) -> None:
    end = index + 1
    while end < len(lines) and not lines[end].strip().startswith("```"):
        if _INSTALL_LINE.match(lines[end].strip()):
            raise BlockError(
                f"{path}:{end + 1}: an install line in a block without an install marker "
                f"(put `<!-- install: KIND [DIST] -->` on the line before the {FENCE} fence)"
            )
        end += 1


def collect(root: Path) -> list[Block]:
    """Every marked block under ``root``; every build block must have the same text."""
    blocks = [
        block
        for path in readme_paths(root)
        for block in parse(path, path.read_text("utf-8"), strict=_is_readme(root, path))
    ]
    builds = {b.text for b in blocks if b.kind == "build"}
    if len(builds) > 1:
        places = ", ".join(b.where(root) for b in blocks if b.kind == "build")
        raise BlockError(f"the build blocks differ; they must be the same text: {places}")
    return blocks


def wheel_names(block: Block) -> list[str]:
    """The narwhal distributions whose wheels the block names as ``dist/`` files, in order."""
    return [m.group(1).replace("_", "-") for m in WHEEL_FILE.finditer(block.text)]


def distinct(blocks: Iterable[Block]) -> list[Install]:
    """Blocks grouped by kind, target and text, in the order first seen."""
    groups: dict[tuple[str, str, str], list[Block]] = {}
    for block in blocks:
        groups.setdefault((block.kind, block.target, block.text), []).append(block)
    return [Install(tuple(group)) for group in groups.values()]
