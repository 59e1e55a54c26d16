"""Reading the inputs (or comparing two sides), rendering the page and writing it atomically
(0600)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from narwhal_report._document import Options, render
from narwhal_report._errors import ReportError, ReportUsageError
from narwhal_report._inputs import check_out, read_inputs
from narwhal_report._sweep_spread import REPLICATIONS
from narwhal_report.compare._page import render_comparison
from narwhal_store import DestinationError, StoreError, write_file_atomic
from narwhal_trial import CompareRequest


def write_report(
    paths: Sequence[Path],
    out: Path,
    *,
    fleet: Path | None = None,
    kv_transfer_s_per_token: float = 0.0,
    replications: int = REPLICATIONS,
) -> Path:
    """Read ``paths`` (stores, probes, run and edge folders), render the report and write it to
    ``out`` (``replications``: of the Monte Carlo at each measured rate of a sweep; 1: none).

    ``ReportUsageError`` for bad input (nothing drawn), ``ReportError`` when the page could not be
    written; either way ``out`` is left as it was.
    """
    options = Options(kv_transfer_s_per_token=kv_transfer_s_per_token, replications=replications)
    check_out(out)
    inputs = read_inputs(paths, fleet)
    page = render(inputs, options)
    return _write(out, page)


def write_comparison(request: CompareRequest, out: Path) -> Path:
    """Compare ``request``'s two sides (as ``narwhal-trial compare``), render the comparison page
    and write it to ``out``. The verdict is on the page, not in an exception: a side that got
    worse still gives a page.

    ``ReportUsageError`` for an unusable ``out``, a side that is missing or unreadable, or sides
    that are not comparable; ``ReportError`` when the page could not be written; either way
    ``out`` is left as it was.
    """
    check_out(out)
    return _write(out, render_comparison(request))


def _write(out: Path, page: bytes) -> Path:
    try:
        write_file_atomic(out, page)
    except DestinationError as exc:
        raise ReportUsageError(f"--out {out}: {exc}") from exc
    except StoreError as exc:
        raise ReportError(str(exc)) from exc
    return out
