"""``prepare --tokenizer DIR``: the served model's ``tokenizer.json``, applied locally to the seed
completion's text when the server returns no token ids and has no ``/tokenize`` (NVIDIA Dynamo's
frontend, whose workers serve no HTTP).

The ``tokenizers`` library (HuggingFace's) is an optional extra: ``pip install
'narwhal-trial[tokenizer]'``. It is imported only when ``--tokenizer`` is given. The text is
encoded without special tokens, so its ids are the served text's, re-tokenized exactly; the
workload records the file's path and SHA-256.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from narwhal_trial._errors import TrialUsageError
from narwhal_trial._files import read_regular

TOKENIZER_FILE = "tokenizer.json"
EXTRA = "pip install 'narwhal-trial[tokenizer]'"


@dataclass(frozen=True, slots=True)
class LocalTokenizer:
    """A loaded ``tokenizer.json``: where it was, its SHA-256, and its encoder."""

    path: Path
    sha256: str
    encode: Callable[[str], list[int]]


def load_tokenizer(folder: Path) -> LocalTokenizer:
    """Read ``folder/tokenizer.json`` (or the file itself when ``folder`` is one);
    TrialUsageError naming the path when it is missing, unreadable or not a tokenizer, or when
    the ``tokenizers`` package is not installed."""
    path = folder / TOKENIZER_FILE if folder.is_dir() else folder
    try:
        data = read_regular(path)
    except OSError as exc:
        raise TrialUsageError(
            f"--tokenizer {folder}: cannot read {path}: {exc.strerror or exc}"
        ) from exc
    try:
        from tokenizers import Tokenizer  # an optional extra: imported only for --tokenizer
    except ImportError as exc:
        raise TrialUsageError(
            f"--tokenizer needs the tokenizers package, which is not installed: {EXTRA}"
        ) from exc
    try:
        tokenizer = Tokenizer.from_str(data.decode("utf-8"))
    except Exception as exc:  # tokenizers raises bare Exception for a bad file
        raise TrialUsageError(f"--tokenizer {path}: not a tokenizer.json: {exc}") from exc

    def encode(text: str) -> list[int]:
        return list(tokenizer.encode(text, add_special_tokens=False).ids)

    return LocalTokenizer(path=path, sha256=hashlib.sha256(data).hexdigest(), encode=encode)
