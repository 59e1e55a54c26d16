"""``python -m narwhal_report``: the same entry point as the ``narwhal-report`` script."""

from narwhal_report.cli import main

main()
