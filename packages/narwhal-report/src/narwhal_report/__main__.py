"""``python -m narwhal_report``: the same entry point as the ``narwhal-report`` script."""

from narwhal_report._cli import main

main()
