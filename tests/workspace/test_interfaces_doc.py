"""docs/interfaces.md stays true: its signatures, names and exception trees are the code's.

Each ``## narwhal_…`` section of the page holds its package's ```` ```python ```` blocks, written in
the form the page's "How to read" paragraph fixes: ``def`` / ``async def`` lines (methods indented
under their ``class``), ``class Name(…)`` constructor lines, ``NAME = value`` constants, ``from M
import …`` lines (which switch the section to module ``M``) and ``# exceptions:`` trees. Comments
are prose. A parameter list is parsed with ``ast`` as a function's and compared with
``inspect.signature`` of the real object: names in order, kinds (``*`` keyword-only, ``*args``,
``**kw``), every default the page writes, and ``async``; a pydantic model's fields are keyword
parameters. Annotations are abbreviations on the page and are not compared. Every top-level name
must be in its module's ``__all__``.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from pydantic import BaseModel

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "interfaces.md"
PACKAGE_MODULES = sorted(p.parent.name for p in ROOT.glob("packages/*/src/*/__init__.py"))

_SECTION = re.compile(r"^## (\S+)", re.M)
_FENCE = re.compile(r"^```python\n(.*?)^```", re.M | re.S)
_STATEMENT = re.compile(r"(?:^|;)[ \t]*(async[ \t]+def|def|class|from)[ \t]+([\w.]+)", re.M)
_NAME_LINE = re.compile(r"([A-Za-z_]\w*)[ \t]*(?::[^=]*)?(?:=(.*))?")
_TREE_START = re.compile(r"#\s*exceptions:\s*([A-Za-z_]\w*)")
_TREE_ENTRY = re.compile(r"#[ \t│├└─┬]*[├└]─+[ \t]*([A-Za-z_]\w*)")
_KEYWORDS = ("def", "async", "class", "from", "@")
_EMPTY = inspect.Parameter.empty
_KINDS = {
    inspect.Parameter.POSITIONAL_ONLY: "positional-only",
    inspect.Parameter.POSITIONAL_OR_KEYWORD: "positional",
    inspect.Parameter.VAR_POSITIONAL: "*args",
    inspect.Parameter.KEYWORD_ONLY: "keyword-only",
    inspect.Parameter.VAR_KEYWORD: "**kwargs",
}


@dataclass(frozen=True)
class Claim:
    """One thing the page states about one name."""

    what: str  # "def", "class", "constant", "import", "tree" ("switch": a from-import's module)
    module: str
    name: str
    line: int
    owner: str | None = None  # the class of a method
    is_async: bool = False
    params: str | None = None  # the text between the parentheses, as written
    value: str | None = None  # a constant's value, as written
    tree: tuple[tuple[str, str, str | None], ...] = ()  # (name, base, params) below the root

    @property
    def label(self) -> str:
        dotted = ".".join(p for p in (self.module, self.owner, self.name) if p)
        return f"{dotted} (docs/interfaces.md line {self.line})"


def _strip_comments(text: str) -> str:
    """``text`` with every comment blanked out, so offsets and columns stay where they were."""
    out = []
    for line in text.split("\n"):
        quote = ""
        for i, char in enumerate(line):
            if quote:
                quote = "" if char == quote else quote
            elif char in "\"'":
                quote = char
            elif char == "#":
                line = line[:i] + " " * (len(line) - i)
                break
        out.append(line)
    return "\n".join(out)


def _closing(text: str, start: int) -> int:
    """The offset of the bracket closing the one at ``start``."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] in "([{":
            depth += 1
        elif text[i] in ")]}":
            depth -= 1
            if depth == 0:
                return i
    raise AssertionError(
        f"unbalanced brackets in docs/interfaces.md from {text[start : start + 60]!r}"
    )


def _indent(text: str, offset: int) -> int:
    start = text.rfind("\n", 0, offset) + 1
    line = text[start:]
    return len(line) - len(line.lstrip(" "))


def _trees(raw: str, base: int, line_of: Callable[[int], int]) -> Iterator[tuple[int, Claim]]:
    """The ``# exceptions:`` trees of one block: each entry's parent is the nearest name above it
    that stands further left."""
    lines = raw.split("\n")
    offset = 0
    i = 0
    while i < len(lines):
        start = _TREE_START.search(lines[i])
        if start is None:
            offset += len(lines[i]) + 1
            i += 1
            continue
        where = base + offset
        stack = [(start.start(1), start.group(1))]
        entries: list[tuple[str, str, str | None]] = []
        offset += len(lines[i]) + 1
        i += 1
        while i < len(lines) and (entry := _TREE_ENTRY.match(lines[i].lstrip())) is not None:
            column = len(lines[i]) - len(lines[i].lstrip()) + entry.start(1)
            while stack and stack[-1][0] >= column:
                stack.pop()
            assert stack, (
                f"docs/interfaces.md line {line_of(base + offset)}: a tree entry left of its root"
            )
            after = lines[i][column + len(entry.group(1)) :]
            params = after[1 : _closing(after, 0)] if after.startswith("(") else None
            entries.append((entry.group(1), stack[-1][1], params))
            stack.append((column, entry.group(1)))
            offset += len(lines[i]) + 1
            i += 1
        yield where, Claim("tree", "", start.group(1), line_of(where), tree=tuple(entries))


def _block_claims(
    block: str, base: int, line_of: Callable[[int], int]
) -> Iterator[tuple[int, Claim]]:
    """Every statement of one code block, with its offset in the page (the module is set later)."""
    yield from _trees(block, base, line_of)
    text = _strip_comments(block)
    consumed: list[tuple[int, int]] = []
    pos = 0
    while (m := _STATEMENT.search(text, pos)) is not None:
        keyword, name, end = m.group(1), m.group(2), m.end()
        if keyword == "from":
            rest = re.match(r"[ \t]*import[ \t]*", text[end:])
            assert rest is not None, (
                f"docs/interfaces.md line {line_of(base + m.start(1))}: from … import"
            )
            end += rest.end()
            if text[end] == "(":
                close = _closing(text, end)
                names, end = text[end + 1 : close], close + 1
            else:
                stop = re.search(r"[;\n]|$", text[end:])
                assert stop is not None
                names, end = text[end : end + stop.start()], end + stop.start()
            for imported in (n.strip() for n in names.split(",")):
                if imported:
                    where = base + m.start(1)
                    yield where, Claim("import", name, imported, line_of(where))
            yield base + m.start(1), Claim("switch", name, "", 0)
            consumed.append((m.start(), end))
            pos = end
            continue
        rest_start = end + len(text[end:]) - len(text[end:].lstrip(" \t"))
        params = None
        if rest_start < len(text) and text[rest_start] == "(":
            close = _closing(text, rest_start)
            params, end = text[rest_start + 1 : close], close + 1
        else:
            assert keyword == "class" and text[rest_start : rest_start + 1] == ":", (
                f"docs/interfaces.md line {line_of(base + m.start(1))}: {keyword} {name} "
                "is followed by neither a parameter list nor a colon"
            )
        where = base + m.start(1)
        claim = Claim(
            "class" if keyword == "class" else "def",
            "",
            name,
            line_of(where),
            is_async=keyword.startswith("async"),
            params=params,
        )
        yield where, claim
        consumed.append((m.start(), end))
        pos = end
    offset = 0
    for line in text.split("\n"):
        inside = any(a <= offset < b for a, b in consumed)
        if line.strip() and not line[0].isspace() and not inside:
            for statement in line.split(";"):
                statement = statement.strip()
                named = _NAME_LINE.fullmatch(statement)
                if (
                    named
                    and not statement.startswith(_KEYWORDS)
                    and (":" in statement or "=" in statement)
                ):
                    where = base + offset
                    value = named.group(2).strip() if named.group(2) else None
                    yield where, Claim("constant", "", named.group(1), line_of(where), value=value)
        offset += len(line) + 1


def _claims() -> list[Claim]:
    """Everything the page's package sections state, each with its module and class."""
    page = DOC.read_text(encoding="utf-8")

    def line_of(offset: int) -> int:
        return page.count("\n", 0, offset) + 1

    headings = list(_SECTION.finditer(page))
    found: list[Claim] = []
    for i, heading in enumerate(headings):
        section = heading.group(1)
        if section not in PACKAGE_MODULES:
            continue
        end = headings[i + 1].start() if i + 1 < len(headings) else len(page)
        module = section
        for fence in _FENCE.finditer(page, heading.end(), end):
            owner: tuple[str, int] | None = None
            stated = sorted(
                _block_claims(fence.group(1), fence.start(1), line_of), key=lambda c: c[0]
            )
            for where, claim in stated:
                column = _indent(page, where)
                if owner is not None and column <= owner[1]:
                    owner = None
                if claim.what == "switch":
                    module = claim.module
                elif claim.what == "import":
                    found.append(claim)
                elif claim.what == "def" and owner is not None:
                    found.append(dataclasses.replace(claim, module=module, owner=owner[0]))
                else:
                    found.append(dataclasses.replace(claim, module=module))
                    if claim.what == "class":
                        owner = (claim.name, column)
    return found


CLAIMS = _claims()


def _ids(claims: list[Claim]) -> list[str]:
    return [".".join(p for p in (c.module, c.owner, c.name) if p) for c in claims]


SIGNATURES = [c for c in CLAIMS if c.params is not None]
NAMES = [c for c in CLAIMS if c.owner is None and c.what != "tree"]
CONSTANTS = [c for c in CLAIMS if c.what == "constant" and c.value is not None]
TREES = [c for c in CLAIMS if c.what == "tree"]


def _module(claim: Claim) -> ModuleType:
    return importlib.import_module(claim.module)


def _exported(claim: Claim, name: str) -> Any:
    module = _module(claim)
    assert name in module.__all__, f"{claim.label}: {name} is not in {claim.module}.__all__"
    return getattr(module, name)


def _real_callable(claim: Claim) -> Any:
    """The function (methods: as defined, with self/cls) or class a claim is about."""
    if claim.owner is None:
        return _exported(claim, claim.name)
    cls = _exported(claim, claim.owner)
    try:
        member = inspect.getattr_static(cls, claim.name)
    except AttributeError:
        pytest.fail(f"{claim.label}: {claim.owner} has no {claim.name}")
    if isinstance(member, classmethod | staticmethod):
        member = member.__func__
    assert inspect.isfunction(member), f"{claim.label}: {claim.name} is not a method"
    return member


def _real_parameters(obj: Any) -> list[inspect.Parameter]:
    """The parameters the code takes; a pydantic model's fields as keyword parameters with their
    defaults, a dataclass's default factories called."""
    if inspect.isclass(obj) and issubclass(obj, BaseModel):
        params = []
        for name, field in obj.model_fields.items():
            if field.is_required():
                default: Any = _EMPTY
            elif field.default_factory is not None:
                default = field.default_factory()  # type: ignore[call-arg]
            else:
                default = field.default
            kind = inspect.Parameter.KEYWORD_ONLY
            params.append(inspect.Parameter(field.alias or name, kind, default=default))
        return params
    factories = {}
    if dataclasses.is_dataclass(obj) and inspect.isclass(obj):
        factories = {
            f.name: f.default_factory()
            for f in dataclasses.fields(obj)
            if f.default_factory is not dataclasses.MISSING
        }
    return [
        p.replace(default=factories[p.name]) if p.name in factories else p
        for p in inspect.signature(obj).parameters.values()
    ]


def _value(node: ast.expr, namespace: dict[str, Any]) -> Any:
    """A default or constant as the page writes it: a literal, ``literal * literal`` or a name
    (dotted or not) looked up where the real object is defined."""
    try:
        return ast.literal_eval(node)
    except ValueError:
        pass
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult | ast.Add):
        left, right = _value(node.left, namespace), _value(node.right, namespace)
        return left * right if isinstance(node.op, ast.Mult) else left + right
    dotted = ast.unparse(node)
    if not re.fullmatch(r"[A-Za-z_][\w.]*", dotted):
        raise ValueError(f"cannot read the value {dotted!r}")
    first, *rest = dotted.split(".")
    if first not in namespace:
        raise ValueError(f"{first} is not a name where the code is defined")
    value = namespace[first]
    for attr in rest:
        value = getattr(value, attr)
    return value


def _doc_parameters(claim: Claim, keyword: bool) -> list[tuple[str, Any, ast.expr | None]]:
    """(name, kind, default as written) for each parameter the page writes."""
    text = claim.params or ""
    prefix = "*, " if keyword and text.strip() else ""
    try:
        tree: ast.Module | None = ast.parse(f"def _({prefix}{text}): pass")
    except SyntaxError as exc:
        tree, problem = None, exc.msg
    if tree is None:
        pytest.fail(f"{claim.label}: the parameter list does not parse ({problem}): ({text})")
    function = tree.body[0]
    assert isinstance(function, ast.FunctionDef)
    args = function.args
    positional: list[tuple[ast.arg, Any]] = [
        (a, inspect.Parameter.POSITIONAL_ONLY) for a in args.posonlyargs
    ]
    positional += [(a, inspect.Parameter.POSITIONAL_OR_KEYWORD) for a in args.args]
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults))
    defaults += list(args.defaults)
    out: list[tuple[str, Any, ast.expr | None]] = [
        (a.arg, kind, d) for (a, kind), d in zip(positional, defaults, strict=True)
    ]
    if args.vararg is not None:
        out.append((args.vararg.arg, inspect.Parameter.VAR_POSITIONAL, None))
    keyword_only = inspect.Parameter.KEYWORD_ONLY
    out += [
        (a.arg, keyword_only, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True)
    ]
    if args.kwarg is not None:
        out.append((args.kwarg.arg, inspect.Parameter.VAR_KEYWORD, None))
    return out


def _shape(params: list[tuple[str, Any]]) -> str:
    return "(" + ", ".join(f"{name} [{_KINDS[kind]}]" for name, kind in params) + ")"


def test_the_page_has_a_section_for_every_package() -> None:
    """Every workspace package has its ``## module`` section, each stating at least one name."""
    stated = {c.module.split(".")[0] for c in CLAIMS}
    assert PACKAGE_MODULES, "no package found under packages/*/src/"
    assert stated == set(PACKAGE_MODULES)


@pytest.mark.parametrize("claim", SIGNATURES, ids=_ids(SIGNATURES))
def test_documented_signature_matches_the_code(claim: Claim) -> None:
    """Parameter names, their order and kinds, the defaults written and async are the code's."""
    obj = _real_callable(claim)
    if claim.what == "class":
        assert inspect.isclass(obj), f"{claim.label}: written as a class, but it is not one"
    real = _real_parameters(obj)
    model = inspect.isclass(obj) and issubclass(obj, BaseModel)
    stated = _doc_parameters(claim, keyword=model)
    stated_shape = [(name, kind) for name, kind, _ in stated]
    real_shape = [(p.name, p.kind) for p in real]
    assert stated_shape == real_shape, (
        f"{claim.label}: the page says {_shape(stated_shape)}, the code takes {_shape(real_shape)}"
    )
    if claim.what == "def":
        real_async = inspect.iscoroutinefunction(obj)
        assert claim.is_async == real_async, (
            f"{claim.label}: the page says {'async ' if claim.is_async else ''}def, the code's is "
            f"{'async ' if real_async else ''}def"
        )
    namespace = vars(sys.modules[obj.__module__])
    for (name, _, written), parameter in zip(stated, real, strict=True):
        if written is None:
            continue
        assert parameter.default is not _EMPTY, (
            f"{claim.label}: the page gives {name} a default ({ast.unparse(written)}), "
            "the code none"
        )
        try:
            value = _value(written, namespace)
        except ValueError as exc:
            pytest.fail(f"{claim.label}: default of {name}: {exc}")
        assert value == parameter.default, (
            f"{claim.label}: the page says {name}={ast.unparse(written)}, "
            f"the code's default is {parameter.default!r}"
        )


@pytest.mark.parametrize("claim", NAMES, ids=_ids(NAMES))
def test_documented_name_is_exported(claim: Claim) -> None:
    """Every name a section states (def, class, constant, import) is in its module's __all__."""
    _exported(claim, claim.name)


@pytest.mark.parametrize("claim", CONSTANTS, ids=_ids(CONSTANTS))
def test_documented_constant_has_its_value(claim: Claim) -> None:
    """A constant written with a readable value has that value."""
    real = _exported(claim, claim.name)
    assert claim.value is not None
    expression = ast.parse(claim.value, mode="eval").body
    try:
        stated = _value(expression, vars(_module(claim)))
    except ValueError:
        return  # a type or an expression the page only describes (e.g. Literal[...])
    assert stated == real, f"{claim.label}: the page says {claim.value}, the code has {real!r}"


@pytest.mark.parametrize("claim", TREES, ids=_ids(TREES))
def test_exception_tree_is_the_class_hierarchy(claim: Claim) -> None:
    """Each tree entry is exported and derives directly from the class drawn above it, its
    written constructor parameters are the code's, and the tree holds every exported subclass of
    the root."""
    root = _exported(claim, claim.name)
    for name, base, params in claim.tree:
        cls = _exported(claim, name)
        parent = _exported(claim, base)
        assert parent in cls.__bases__, (
            f"{claim.label}: the tree puts {name} under {base}; its bases are "
            f"{[b.__name__ for b in cls.__bases__]}"
        )
        if params is not None:
            entry = Claim("class", claim.module, name, claim.line, params=params)
            stated = [(n, kind) for n, kind, _ in _doc_parameters(entry, keyword=False)]
            real = [(p.name, p.kind) for p in inspect.signature(cls).parameters.values()]
            assert stated == real, (
                f"{entry.label}: the tree says {_shape(stated)}, the code takes {_shape(real)}"
            )
    module = _module(claim)
    exported = {
        n
        for n in module.__all__
        if inspect.isclass(getattr(module, n)) and issubclass(getattr(module, n), root)
    }
    drawn = {claim.name} | {name for name, _, _ in claim.tree}
    assert drawn == exported, (
        f"{claim.label}: the tree draws {sorted(drawn)}, {claim.module} exports {sorted(exported)}"
    )


def test_the_page_stands_alone() -> None:
    """The page points at nothing outside the repository and names no issue numbers."""
    page = DOC.read_text(encoding="utf-8")
    for target in re.findall(r"\]\(([^)#]+)\)", page):
        if "://" not in target:
            resolved = (DOC.parent / target).resolve()
            assert resolved.is_relative_to(ROOT), f"link {target} leaves the repository"
    assert "../" not in page, "a path outside the repository"
    assert re.search(r"\bissue\s*#?\d+|#\d{2,}\b", page, re.I) is None


@pytest.mark.parametrize("package", PACKAGE_MODULES)
def test_every_exported_name_is_on_the_page(package: str) -> None:
    """A package's whole ``__all__`` is stated on the page (as a name, or in an exception tree),
    so a new export cannot go undocumented."""
    stated = {c.name for c in CLAIMS if c.module == package and c.owner is None}
    stated |= {name for c in TREES if c.module == package for name, _, _ in c.tree}
    missing = sorted(set(importlib.import_module(package).__all__) - stated)
    assert not missing, f"{package} exports {missing}, which docs/interfaces.md does not state"


def test_every_link_on_the_page_resolves() -> None:
    """Each relative link names a file of the repository that exists."""
    page = DOC.read_text(encoding="utf-8")
    targets = [t for t in re.findall(r"\]\(([^)#]+)", page) if "://" not in t]
    assert targets, "the page links no repository file (it should link docs/design.md)"
    for target in targets:
        assert (DOC.parent / target).is_file(), f"link {target} names no file"
