"""``prepare --tokenizer``: the local tokenizer.json, and its clear errors."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import pytest

from narwhal_sim import decode, write_model_folder
from narwhal_trial._errors import TrialUsageError
from narwhal_trial.workload._tokenizer import load_tokenizer


def test_the_sim_folders_tokenizer_gives_back_the_engines_ids(tmp_path: Path) -> None:
    """A folder or its tokenizer.json: the same file, its SHA-256, the text's ids exactly."""
    write_model_folder(tmp_path)
    by_folder = load_tokenizer(tmp_path)
    by_file = load_tokenizer(tmp_path / "tokenizer.json")
    assert by_folder.path == by_file.path == tmp_path / "tokenizer.json"
    digest = hashlib.sha256((tmp_path / "tokenizer.json").read_bytes()).hexdigest()
    assert by_folder.sha256 == digest
    ids = [400, 401, 12345, 31999]
    assert by_folder.encode(decode(ids)) == ids  # the simulator's completion text of those ids


def test_a_missing_file_names_the_path(tmp_path: Path) -> None:
    with pytest.raises(TrialUsageError, match=r"--tokenizer .*nope: cannot read .*nope"):
        load_tokenizer(tmp_path / "nope")


def test_a_file_that_is_no_tokenizer_says_so(tmp_path: Path) -> None:
    bad = tmp_path / "tokenizer.json"
    bad.write_text('{"not": "a tokenizer"}')
    with pytest.raises(TrialUsageError, match=r"not a tokenizer\.json"):
        load_tokenizer(tmp_path)


def test_without_the_tokenizers_package_it_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The optional extra not installed: one line saying how to install it."""
    write_model_folder(tmp_path)
    monkeypatch.setitem(sys.modules, "tokenizers", None)  # import tokenizers raises ImportError
    with pytest.raises(TrialUsageError) as caught:
        load_tokenizer(tmp_path)
    assert "pip install 'narwhal-trial[tokenizer]'" in str(caught.value)
