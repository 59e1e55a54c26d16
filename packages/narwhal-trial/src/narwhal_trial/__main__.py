"""``python -m narwhal_trial``: the same command as ``narwhal-trial``."""

from narwhal_trial.cli import main

main()
