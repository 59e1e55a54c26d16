"""Static SVG figures with matplotlib: Agg backend, text kept as text, no fonts embedded, stable
ids, no date: the same inputs give the same bytes.

matplotlib and numpy are imported inside the functions, so importing the package (and
``narwhal-report --help``) stays fast.
"""

from __future__ import annotations

import contextlib
import io
import re
from collections.abc import Iterator
from html import escape
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from matplotlib.figure import Figure

# Colours that survive greyscale printing and colour blindness (Okabe-Ito).
GOOD: Final = "#009e73"
SLOW: Final = "#e69f00"
ERROR: Final = "#d55e00"
MISS: Final = "#cc79a7"
BLUE: Final = "#0072b2"
SKY: Final = "#56b4e9"
GREY: Final = "#7f7f7f"
INK: Final = "#222222"
SERIES: Final = (BLUE, SLOW, GOOD, ERROR, MISS, SKY, "#f0e442", INK)

_STYLE: Final[dict[str, Any]] = {
    "svg.fonttype": "none",  # text stays <text>: no glyph paths, no embedded fonts
    "svg.hashsalt": "narwhal-report",  # stable clip-path and element ids
    "svg.image_inline": True,
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans", "Helvetica", "Arial"],
    "font.size": 9.0,
    "axes.titlesize": 10.0,
    "axes.titleweight": "bold",
    "axes.labelsize": 9.0,
    "axes.edgecolor": "#555555",
    "axes.linewidth": 0.7,
    "axes.grid": True,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "grid.color": "#dddddd",
    "grid.linewidth": 0.6,
    "legend.fontsize": 8.0,
    "legend.frameon": False,
    "xtick.labelsize": 8.0,
    "ytick.labelsize": 8.0,
    "lines.linewidth": 1.4,
    "figure.dpi": 72.0,
    "path.simplify": True,
}
_PROLOGUE = re.compile(rb"^.*?(?=<svg)", re.DOTALL)


@contextlib.contextmanager
def plotting() -> Iterator[None]:
    """Our style for every figure drawn and saved inside the block (matplotlib on Agg)."""
    import matplotlib

    matplotlib.use("Agg")
    style: Any = _STYLE  # matplotlib types rc keys as a Literal of every name
    with matplotlib.rc_context(style):
        yield


def new_figure(
    rows: int = 1, cols: int = 1, *, size: tuple[float, float] = (9.0, 3.2), **kwargs: Any
) -> tuple[Figure, Any]:
    """A figure with ``rows`` x ``cols`` axes (an array; call inside :func:`plotting`)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=size, layout="constrained")
    return fig, fig.subplots(rows, cols, squeeze=False, **kwargs)


def to_svg(fig: Figure, label: str) -> str:
    """The figure as an inline ``<svg>`` element (no XML prologue, no date, no creator), labelled
    ``label`` for screen readers (call inside :func:`plotting`)."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None})
    data = _PROLOGUE.sub(b"", buffer.getvalue(), count=1).decode()
    data = data.replace("<svg ", f'<svg role="img" aria-label="{escape(label)}" ', 1)
    return data.strip()


def integer_ticks(axis: Any) -> None:
    """Only whole numbers on ``axis`` (request numbers, streams, requests in flight)."""
    from matplotlib.ticker import MaxNLocator

    axis.set_major_locator(MaxNLocator(integer=True))


_SVG_BLOCK: Final = re.compile(r"<svg\b.*?</svg>", re.DOTALL)
_ID: Final = re.compile(r'\bid="([^"]+)"')
_REFERENCE: Final = re.compile(r'(url\(#|href="#)([^)"]+)')


def unique_ids(page: str) -> str:
    """``page`` with every id inside its ``n``-th inline ``<svg>`` (and every reference to one:
    ``url(#…)``, ``href="#…"``) prefixed ``svgN-``: matplotlib numbers each figure's elements from
    1 (``figure_1``, ``patch_1``), so two figures on one page would share ids."""
    count = 0

    def one(match: re.Match[str]) -> str:
        nonlocal count
        count += 1
        prefix = f"svg{count}-"
        block = _ID.sub(lambda m: f'id="{prefix}{m.group(1)}"', match.group(0))
        return _REFERENCE.sub(lambda m: f"{m.group(1)}{prefix}{m.group(2)}", block)

    return _SVG_BLOCK.sub(one, page)
