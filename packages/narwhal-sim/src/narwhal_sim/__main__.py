"""``python -m narwhal_sim``."""

from narwhal_sim.cli import main

main()
