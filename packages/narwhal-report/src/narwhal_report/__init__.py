"""narwhal_report: profiles and trials as one offline, self-contained HTML page.

``write_report`` reads profile stores and freshness probes (through narwhal-store) and trial run
and edge folders (through narwhal-trial's record models), draws static SVG figures with matplotlib
and writes one HTML file with no script and nothing fetched; ``render`` gives the page's bytes.
``write_comparison`` and ``render_comparison`` do the same for two deployments compared as
``narwhal-trial compare`` judges them (a ``CompareRequest``): the verdicts and both sides' figures
on one page. The command is ``narwhal-report PATH… --out report.html`` (``--compare A B`` for a
comparison).
"""

from narwhal_report._document import Options, render
from narwhal_report._errors import ReportError, ReportUsageError
from narwhal_report._inputs import Inputs, read_inputs
from narwhal_report._report import write_comparison, write_report
from narwhal_report.compare._page import render_comparison

__all__ = [
    "Inputs",
    "Options",
    "ReportError",
    "ReportUsageError",
    "read_inputs",
    "render",
    "render_comparison",
    "write_comparison",
    "write_report",
]
