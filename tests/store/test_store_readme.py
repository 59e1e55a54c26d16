"""The README's library example runs against a store the library wrote."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from narwhal_store import write_store

README = Path(__file__).resolve().parents[2] / "packages" / "narwhal-store" / "README.md"
PairFactory = Callable[..., Any]


def test_readme_example_predicts_ttft(
    tmp_path: Path, make_pair: PairFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    """The example reads a verified store and prints TTFT(8192) = a + b·L + c·L²."""
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    assert blocks, "README has no python example"
    example = blocks[0]
    assert len(example.strip().splitlines()) <= 12
    store_path = tmp_path / "profiles" / "fleet-profiles.json"
    write_store(store_path, *make_pair(), mode="fresh")
    code = example.replace('"profiles/fleet-profiles.json"', repr(str(store_path)))
    exec(compile(code, str(README), "exec"), {})  # runs our own README example
    expected = (0.01 + 1e-5 * 8192 + 1e-10 * 8192**2) * 1e3
    out = capsys.readouterr().out
    assert out == (
        "h200-0.prefill (group h200-0, decode=1+prefill=1, target prefill): "
        f"TTFT(8192) = {expected:.1f} ms, measured 256..4096\n"
    )
