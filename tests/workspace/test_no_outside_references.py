"""Code, tests, tools, benches and docs say what a thing is: no issue or task number, and no
reference to anything outside the repository (the shared specification folder, the tool library,
a path on the machine it was written on). The repository must stand alone."""

from __future__ import annotations

import re
import subprocess

import pytest

from .test_workspace_layout import ROOT

#: What the check reads: every tracked text file but the lock file and recorded test data.
SUFFIXES = (".py", ".md", ".toml", ".txt", ".cfg", ".sh", ".yml", ".yaml", ".ini")
EXTRA = ("Makefile", ".ci/run")
SKIPPED = ("uv.lock", "tests/trial/data/")

FORBIDDEN = {
    "an issue or task number": re.compile(
        r"\b(?:issue|task|ticket|pr|pull request)s?\s*(?:no\.?\s*)?#?\d+\b", re.IGNORECASE
    ),
    # "guidellm#924", not a Markdown anchor ("design.md#11-predictions")
    "an issue tracker's number": re.compile(r"(?<![\w.-])[A-Za-z][\w-]*#\d+\b(?!-)"),
    "the shared specification or reference folder": re.compile(
        r"(?:\.\./)+shared\b|\bshared/(?:spec|reference)\b"
    ),
    "the tool library": re.compile(r"\.library\b"),
    "a path on the writer's machine": re.compile(r"(?<![\w.])/(?:work|root|home/\w+)/"),
}
#: Lines allowed to match, with the reason: a test must say why an exception exists.
ALLOWED: dict[str, str] = {}


def _tracked() -> list[str]:
    done = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True, timeout=60
    )
    return [
        name
        for name in done.stdout.splitlines()
        if (name.endswith(SUFFIXES) or name in EXTRA) and not name.startswith(SKIPPED)
    ]


def test_the_check_reads_the_whole_repository() -> None:
    """Code, tests, tools, benches and docs are all read."""
    names = _tracked()
    for expected in ("README.md", "Makefile", "docs/design.md", "tools/demo.py"):
        assert expected in names
    for folder in ("packages/", "tests/", "tools/", "bench/", "docs/"):
        assert any(n.startswith(folder) for n in names), folder


@pytest.mark.parametrize("what", sorted(FORBIDDEN))
def test_nothing_points_outside_the_repository(what: str) -> None:
    """No tracked file holds ``what``: say what the thing is instead."""
    pattern = FORBIDDEN[what]
    found = []
    for name in _tracked():
        if name == "tests/workspace/test_no_outside_references.py":
            continue  # its own patterns
        for number, line in enumerate((ROOT / name).read_text().splitlines(), 1):
            if pattern.search(line) and f"{name}:{number}" not in ALLOWED:
                found.append(f"{name}:{number}: {line.strip()[:120]}")
    assert not found, f"{what}:\n" + "\n".join(found[:20])


@pytest.mark.parametrize(
    ("what", "line"),
    [
        ("an issue or task number", "fixes " + "issue" + " 23's drift"),
        ("an issue or task number", "see Issue #" + "41"),
        ("an issue tracker's number", "as guidellm#924 asks"),
        ("an issue tracker's number", "vllm-project/vllm#12345."),
        ("the shared specification or reference folder", "/".join(["..", "shared", "spec"])),
        ("the tool library", "../.library/env"),
        ("a path on the writer's machine", "written in /work/main/tools"),
    ],
)
def test_each_pattern_catches_what_it_names(what: str, line: str) -> None:
    """The patterns are not vacuous: each finds the kind of reference it forbids."""
    assert FORBIDDEN[what].search(line)


@pytest.mark.parametrize(
    "line",
    [
        "[docs/design.md §11](../../docs/design.md#11-predictions-with-the-profiles-own-spread)",
        'GREY: Final = "#7f7f7f"  INK = "#222222"',
        "the runbook's 200 requests at 12 request/s",
        "shared_device: {group: h200-0}",
    ],
)
def test_what_is_not_a_reference_passes(line: str) -> None:
    """Anchors, colours, counts and the fleet file's own words are not references."""
    assert not any(pattern.search(line) for pattern in FORBIDDEN.values())
