"""``python -m narwhal_store.schemas --write DIR``: (re)generate the checked-in JSON Schemas."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from narwhal_store._schemas import write_schemas

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Write the schemas into the folder given by ``--write``; returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m narwhal_store.schemas", description=__doc__)
    parser.add_argument("--write", metavar="DIR", required=True, help="folder to write into")
    args = parser.parse_args(argv)
    for path in write_schemas(args.write):
        sys.stdout.write(f"wrote {path}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
