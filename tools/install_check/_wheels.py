"""The wheels the build block wrote: each one's name, version and narwhal requirements, read from
its ``METADATA``; and which narwhal distributions an install of one target must bring.
"""

from __future__ import annotations

import re
import zipfile
from dataclasses import dataclass
from email.parser import HeaderParser
from pathlib import Path

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_EXTRA = re.compile(r"""extra\s*==\s*["']([^"']+)["']""")


def normalize(name: str) -> str:
    """A distribution name as PEP 503 compares them."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class Wheel:
    """One built wheel."""

    path: Path
    name: str  # normalized
    version: str
    requires: tuple[str, ...]  # normalized names, no marker
    extras: dict[str, tuple[str, ...]]  # extra -> normalized names it adds


def read_wheel(path: Path) -> Wheel:
    """Name, version and requirements from the wheel's ``*.dist-info/METADATA``."""
    with zipfile.ZipFile(path) as archive:
        meta = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        headers = HeaderParser().parsestr(archive.read(meta).decode("utf-8"))
    requires: list[str] = []
    extras: dict[str, list[str]] = {}
    for requirement in headers.get_all("Requires-Dist") or []:
        match = _NAME.match(requirement)
        if match is None:
            continue
        name = normalize(match.group(0))
        marker = requirement.split(";", 1)[1] if ";" in requirement else ""
        extra = _EXTRA.search(marker)
        if extra:
            extras.setdefault(extra.group(1), []).append(name)
        elif not marker.strip():
            requires.append(name)
    return Wheel(
        path=path,
        name=normalize(headers["Name"]),
        version=headers["Version"],
        requires=tuple(requires),
        extras={k: tuple(v) for k, v in extras.items()},
    )


def read_wheels(dist: Path) -> dict[str, Wheel]:
    """Every ``*.whl`` in ``dist``, by normalized name (two wheels of one name: ``ValueError``)."""
    wheels: dict[str, Wheel] = {}
    for path in sorted(dist.glob("*.whl")):
        wheel = read_wheel(path)
        if wheel.name in wheels:
            raise ValueError(f"{dist} holds two wheels of {wheel.name}")
        wheels[wheel.name] = wheel
    return wheels


def narwhal_closure(wheels: dict[str, Wheel], dist: str) -> set[str]:
    """``dist`` and every narwhal distribution it requires, transitively."""
    found: set[str] = set()
    todo = [normalize(dist)]
    while todo:
        name = todo.pop()
        if name in found:
            continue
        found.add(name)
        todo += [r for r in wheels[name].requires if r.startswith("narwhal-")]
    return found
