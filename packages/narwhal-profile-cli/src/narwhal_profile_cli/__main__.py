"""``python -m narwhal_profile_cli``: the ``narwhal-profile`` command."""

from narwhal_profile_cli.cli import main

main()
