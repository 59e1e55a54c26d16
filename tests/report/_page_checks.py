"""What every page the report writes must hold, checked the same way for each: valid ids (none
twice, every in-page link and SVG reference landing, no two contents entries alike) and nothing
fetched (no script, no external address, no import, no frame)."""

from __future__ import annotations

import re
from html.parser import HTMLParser


def assert_ids_unique_and_links_land(page: str) -> None:
    """No id twice (each inline SVG's matplotlib ids carry the figure's own prefix), every in-page
    link and every SVG reference names an id that exists, no two entries of the contents read
    the same."""
    ids = re.findall(r'\bid="([^"]+)"', page)
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    assert not repeated, repeated[:10]
    known = set(ids)
    targets = re.findall(r'href="#([^"]+)"', page) + re.findall(r"url\(#([^)]+)\)", page)
    assert targets and not [t for t in targets if t not in known]
    contents = page.split("<nav", 1)[1].split("</nav>", 1)[0]
    entries = re.findall(r'<a href="#[^"]+">([^<]+)</a>', contents)
    assert len(entries) == len(set(entries)), entries


def assert_nothing_fetched(page: str) -> None:
    """No script, no external URL in src/href, no @import, no url(...) to the network, no link or
    frame; every href stays on the page."""
    assert "<script" not in page.lower()
    assert not re.search(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", page, re.I)
    assert "@import" not in page
    assert not re.search(r"url\(\s*['\"]?\s*(?:https?:)?//", page, re.I)
    assert "<link" not in page.lower() and "<iframe" not in page.lower()
    hrefs = re.findall(r"""href=["']([^"']*)["']""", page)
    assert hrefs and all(h.startswith("#") for h in hrefs)


_VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta",
                   "source", "track", "wbr"})  # fmt: skip


class _Nesting(HTMLParser):
    """Every element closed, in the order opened (void elements stand alone)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.open: list[str] = []
        self.faults: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in _VOID:
            self.open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in _VOID or not self.open or self.open[-1] != tag:
            self.faults.append(f"</{tag}> closes {self.open[-1] if self.open else 'nothing'}")
        else:
            self.open.pop()


def assert_well_nested(page: str) -> None:
    """Every element the page opens is closed, in order: no stray or misplaced end tag."""
    parser = _Nesting()
    parser.feed(page)
    parser.close()
    assert not parser.faults, parser.faults[:5]
    assert parser.open == [], parser.open
