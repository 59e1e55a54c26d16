"""Small HTML builders: escaped text, tables, badges, figures and sections."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from html import escape


class Markup(str):
    """Text that is already HTML (never escaped again)."""

    __slots__ = ()


def esc(value: object) -> Markup:
    """``value`` as HTML text (Markup passes through)."""
    if isinstance(value, Markup):
        return value
    return Markup(escape(str(value)))


def tag(name: str, body: object = "", **attrs: str | None) -> Markup:
    """``<name attrs>body</name>``; ``class_`` gives ``class``; None attributes are left out."""
    parts = "".join(
        f' {k.rstrip("_").replace("_", "-")}="{escape(v)}"'
        for k, v in attrs.items()
        if v is not None
    )
    return Markup(f"<{name}{parts}>{esc(body)}</{name}>")


def join(items: Iterable[object]) -> Markup:
    """The items' HTML one after another."""
    return Markup("".join(esc(i) for i in items))


def slug(*parts: object) -> str:
    """An id from ``parts`` (letters, digits, dashes)."""
    text = "-".join(str(p) for p in parts).lower()
    return re.sub(r"[^a-z0-9]+", "-", text).strip("-")


def badge(ok: bool | None, yes: str = "PASS", no: str = "MISS") -> Markup:
    """A coloured verdict word (``None``: a neutral n/a)."""
    if ok is None:
        return tag("span", "n/a", class_="badge na")
    return tag("span", yes if ok else no, class_="badge ok" if ok else "badge bad")


def table(head: Sequence[str], rows: Iterable[Sequence[object]], *, class_: str = "grid") -> Markup:
    """A table with a header row; cells are escaped unless Markup."""
    header = tag("tr", join(tag("th", h) for h in head))
    body = join(tag("tr", join(tag("td", c) for c in row)) for row in rows)
    return tag("table", join([tag("thead", header), tag("tbody", body)]), class_=class_)


def facts(rows: Iterable[tuple[str, object]]) -> Markup:
    """A two-column table of named facts."""
    body = join(tag("tr", join([tag("th", k, scope="row"), tag("td", v)])) for k, v in rows)
    return tag("table", tag("tbody", body), class_="facts")


def figure(svg: str, caption: str) -> Markup:
    """An inline SVG with its caption."""
    return tag("figure", join([Markup(svg), tag("figcaption", caption)]))


def warnings(lines: Sequence[str]) -> Markup:
    """A warning box listing ``lines`` (nothing when empty)."""
    if not lines:
        return Markup("")
    items = join(tag("li", line) for line in lines)
    return tag("div", join([tag("strong", "Warnings"), tag("ul", items)]), class_="warn")


def ms(value: float | None) -> str:
    """Seconds as ``12.3 ms`` (``n/a`` for None)."""
    return "n/a" if value is None else f"{value * 1000:.1f} ms"


def pct(value: float | None) -> str:
    """A fraction as ``12.3%``."""
    return "n/a" if value is None else f"{value:.1%}"


@dataclass(slots=True)
class Section:
    """One section of the document: its id, heading, body and subsections (for the contents)."""

    id: str
    title: str
    body: Markup
    children: list[Section] = field(default_factory=list)
