"""``python -m narwhal_trial.schemas --write DIR``: (re)generate the checked-in JSON Schemas."""

from __future__ import annotations

from collections.abc import Sequence

from narwhal_trial._schemas import schemas_command

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Write the schemas into the folder given by ``--write``; returns the exit code."""
    return schemas_command("python -m narwhal_trial.schemas", argv)


if __name__ == "__main__":
    raise SystemExit(main())
