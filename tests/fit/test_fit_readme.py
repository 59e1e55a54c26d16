"""The README's store example runs as written against a store holding a real fit document."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from narwhal_fit import fit_prefill

README = Path(__file__).resolve().parents[2] / "packages" / "narwhal-fit" / "README.md"


def _store_example() -> str:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.DOTALL)
    matching = [b for b in blocks if "load_fit(profile" in b]
    assert len(matching) == 1
    return str(matching[0])


def _profile(iid: str, prefill_fit: dict[str, Any]) -> dict[str, Any]:
    """A store profile laid out as narwhal-store writes it: the iid is ``key.engine``, while
    ``engine`` holds the live engine facts."""
    key = {"engine": iid, "gpu_group": None, "role_split": {"prefill": 1}, "target_role": "prefill"}
    facts = {"url": "http://127.0.0.1:8101", "model": "m", "max_model_len": 16384, "version": "1"}
    return {"key": key, "engine": facts, "prefill_fit": prefill_fit}


def test_readme_store_example(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The example prints the fitted TTFT at 8192 tokens and the measured domain."""
    fit = fit_prefill([256, 1024, 4096, 8192, 16384], [0.018, 0.034, 0.096, 0.216, 0.478])
    store = {
        "format": "narwhal.profiles",
        "format_version": 1,
        "profiles": [_profile("other", {}), _profile("h200-0.prefill", fit.to_dict())],
    }
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "fleet-profiles.json").write_text(json.dumps(store), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    exec(compile(_store_example(), str(README), "exec"), {})
    out = capsys.readouterr().out
    assert f"TTFT at 8192 tokens: {fit.predict(8192) * 1e3:.1f} ms" in out
    assert "measured on 256..16384 tokens" in out
