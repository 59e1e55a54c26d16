"""Launcher for the synthetic deployment trial (the runbook's ``load_trial.py``).

Runs ``narwhal_trial.cli.main`` from the installed ``narwhal-trial`` package (``make setup``
installs it into ``.venv``); ``sys.path`` is left alone. Its own path goes into the run manifest's
helper digest.
"""

from __future__ import annotations

from pathlib import Path

from narwhal_trial.cli import main

if __name__ == "__main__":
    main(launcher=Path(__file__).resolve())
