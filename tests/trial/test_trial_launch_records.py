"""Unit tests of the launch-record and profile-domain checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from narwhal_trial._check import launch_record_item, launch_record_items


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        ("vllm serve meta-llama/Llama-3.1-8B --no-enable-prefix-caching --port 8000\n", True),
        ("vllm serve m \\\n  --max-model-len 16384 \\\n  --no-enable-prefix-caching\n", True),
        ("vllm serve m --port 8000\n", False),
        ("vllm serve m --no-enable-prefix-caching --enable-prefix-caching\n", False),
        ("# --no-enable-prefix-caching\nvllm serve m\n", False),
    ],
)
def test_launch_record(tmp_path: Path, text: str, ok: bool) -> None:
    """A record passes only when the command line's last prefix-caching flag turns it off."""
    path = tmp_path / "launch.txt"
    path.write_text(text)
    assert launch_record_item(path).ok is ok


def test_unreadable_launch_record_fails(tmp_path: Path) -> None:
    """A missing record is a failing item, not a crash."""
    item = launch_record_item(tmp_path / "missing.txt")
    assert not item.ok and "cannot read" in item.detail


def test_no_launch_record_is_a_failing_item(tmp_path: Path) -> None:
    """The runbook retains launch records: check without any fails instead of skipping them."""
    (missing,) = launch_record_items([])
    assert not missing.ok and "--launch-record" in missing.detail
    path = tmp_path / "launch.txt"
    path.write_text("vllm serve m --no-enable-prefix-caching\n")
    assert [item.ok for item in launch_record_items([path, path])] == [True, True]
