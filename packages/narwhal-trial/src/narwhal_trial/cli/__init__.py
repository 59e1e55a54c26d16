"""The ``narwhal-trial`` command (also ``python -m narwhal_trial`` and
``tools/measurement/load_trial.py``): typer options and the command bodies that turn the libraries'
results and errors into lines and exit codes. ``narwhal_trial.cli:main`` is the console entry
point."""

from narwhal_trial.cli._app import main

__all__ = ["main"]
