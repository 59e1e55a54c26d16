"""``--shard auto``: this process's share, read from a Kubernetes Indexed Job's environment.

Kubernetes sets ``JOB_COMPLETION_INDEX`` (0 to completions - 1) in every pod of an Indexed Job,
but publishes no variable with the job's completion count: the manifest sets
``NARWHAL_SHARD_COUNT``, equal to the job's ``spec.completions``. The share is index + 1 of count
(``--shard K/M`` counts from 1). The environment is handed in: only the command layer reads
``os.environ``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from narwhal_profile_cli._errors import ProfileUsageError

INDEX_VARIABLE = "JOB_COMPLETION_INDEX"
COUNT_VARIABLE = "NARWHAL_SHARD_COUNT"

_DIGITS = re.compile(r"[0-9]+")
_UNSET = {
    INDEX_VARIABLE: "Kubernetes sets it in the pods of an Indexed Job",
    COUNT_VARIABLE: "set it in the Job's manifest, equal to its spec.completions",
}


@dataclass(frozen=True, slots=True)
class EnvShare:
    """The share the environment names: ``index`` of ``count`` (1-based, as ``--shard K/M``)."""

    index: int
    count: int
    origin: str
    """The variables as read, for messages: ``JOB_COMPLETION_INDEX=1, NARWHAL_SHARD_COUNT=3``."""


def shard_from_env(environ: Mapping[str, str]) -> EnvShare:
    """Share ``JOB_COMPLETION_INDEX + 1`` of ``NARWHAL_SHARD_COUNT``.

    Refused (a usage error naming the variable and its value) when either is missing or not a
    non-negative integer, when the count is 0, or when the index is not below the count.
    """
    index = _non_negative(environ, INDEX_VARIABLE)
    count = _non_negative(environ, COUNT_VARIABLE)
    if count < 1:
        raise ProfileUsageError(f"--shard auto: {_shown(environ, COUNT_VARIABLE)} is not positive")
    if index >= count:
        raise ProfileUsageError(
            f"--shard auto: {_shown(environ, INDEX_VARIABLE)} is not below "
            f"{_shown(environ, COUNT_VARIABLE)} (the index counts from 0; "
            f"{COUNT_VARIABLE} must equal the Job's spec.completions)"
        )
    read = (f"{name}={environ[name].strip()}" for name in (INDEX_VARIABLE, COUNT_VARIABLE))
    return EnvShare(index + 1, count, ", ".join(read))


def _non_negative(environ: Mapping[str, str], name: str) -> int:
    value = environ.get(name)
    if value is None:
        raise ProfileUsageError(f"--shard auto: {name} is not set ({_UNSET[name]})")
    text = value.strip()
    if not _DIGITS.fullmatch(text):
        raise ProfileUsageError(
            f"--shard auto: {_shown(environ, name)} is not a non-negative integer"
        )
    try:
        return int(text)
    except ValueError as exc:  # more digits than Python converts
        raise ProfileUsageError(f"--shard auto: {_shown(environ, name)} is too large") from exc


def _shown(environ: Mapping[str, str], name: str) -> str:
    """``NAME='value'``, the value bounded so that a huge one cannot flood the terminal."""
    value = environ[name]
    return f"{name}={value if len(value) <= 80 else value[:77] + '...'!r}"
