"""narwhal_profile_cli: the ``narwhal-profile`` command.

Measures live vLLM engines into latency profiles (a profile store plus a ``.samples.json`` sidecar
holding every raw observation and the evidence each profile is bound to), refits TTFT from retained
samples, and merges separately measured role mixes. ``run(argv)`` runs the command and returns its
exit code; ``main()`` is the console-script entry point.
"""

from narwhal_profile_cli.cli import main, run

__all__ = ["main", "run"]
