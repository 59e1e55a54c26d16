"""Reading the inputs, rendering the page and writing it atomically (0600)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from narwhal_report._document import Options, render
from narwhal_report._errors import ReportError, ReportUsageError
from narwhal_report._inputs import check_out, read_inputs
from narwhal_store import DestinationError, StoreError, write_file_atomic


def write_report(
    paths: Sequence[Path],
    out: Path,
    *,
    fleet: Path | None = None,
    kv_transfer_s_per_token: float = 0.0,
) -> Path:
    """Read ``paths`` (stores and run folders), render the report and write it to ``out``.

    ``ReportUsageError`` for bad input (nothing drawn), ``ReportError`` when the page could not be
    written; either way ``out`` is left as it was.
    """
    check_out(out)
    inputs = read_inputs(paths, fleet)
    page = render(inputs, Options(kv_transfer_s_per_token=kv_transfer_s_per_token))
    try:
        write_file_atomic(out, page)
    except DestinationError as exc:
        raise ReportUsageError(f"--out {out}: {exc}") from exc
    except StoreError as exc:
        raise ReportError(str(exc)) from exc
    return out
