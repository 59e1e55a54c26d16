"""Build a small byte-level BPE tokenizer locally, in the layout Hugging Face loaders read.

Run with an interpreter that has the ``tokenizers`` package (one of the throwaway bench venvs)::

    .bench-venvs/aiperf/bin/python bench/clients/build_tokenizer.py OUT_DIR

Nothing comes from a model hub: the training text is generated here from a fixed seed. Writes
``tokenizer.json``, ``tokenizer_config.json``, ``special_tokens_map.json`` and ``config.json``
(AutoTokenizer/AutoConfig on a local path need these), then checks that the counterpart's token
text (``" the"``) is exactly one token, so client-side counts of its output are exact.
"""

from __future__ import annotations

import importlib
import json
import random
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

VOCAB_SIZE = 4096
TOKEN_TEXT = " the"
_SYLLABLES = [
    "ka",
    "ri",
    "to",
    "na",
    "me",
    "lo",
    "su",
    "vi",
    "de",
    "pa",
    "mo",
    "ne",
    "shi",
    "ta",
    "ru",
    "ko",
    "fa",
    "li",
    "ga",
    "ze",
    "bo",
    "nu",
    "ye",
    "wa",
    "ther",
    "in",
    "on",
    "an",
    "er",
    "ing",
    "ed",
    "st",
    "al",
    "es",
    "re",
    "ou",
    "it",
    "at",
    "or",
    "ar",
    "en",
]
_COMMON = [
    "the",
    "of",
    "and",
    "to",
    "a",
    "in",
    "is",
    "it",
    "you",
    "that",
    "he",
    "was",
    "for",
    "on",
    "are",
    "as",
    "with",
    "his",
    "they",
    "I",
    "at",
    "be",
    "this",
    "have",
    "from",
    "or",
    "one",
    "had",
    "by",
    "word",
    "but",
    "not",
    "what",
    "all",
    "were",
    "we",
    "when",
    "your",
    "can",
    "said",
    "there",
    "use",
    "an",
    "each",
    "which",
    "she",
    "do",
    "how",
    "their",
    "if",
    "will",
    "up",
    "other",
    "about",
    "out",
    "many",
    "then",
    "them",
    "these",
    "so",
    "some",
    "her",
    "would",
]


def _corpus(seed: int = 1729, lines: int = 20000) -> Iterator[str]:
    rng = random.Random(seed)
    invented = ["".join(rng.choices(_SYLLABLES, k=rng.randint(1, 3))) for _ in range(3000)]
    for _ in range(lines):
        words = [
            rng.choice(_COMMON) if rng.random() < 0.5 else rng.choice(invented)
            for _ in range(rng.randint(6, 20))
        ]
        yield " ".join(words) + rng.choice([".", ",", "!", "?", ";", ""])


def build(out: Path) -> None:
    """Train the tokenizer and write its Hugging Face files into ``out``."""
    tk: Any = importlib.import_module("tokenizers")
    tokenizer = tk.Tokenizer(tk.models.BPE(unk_token=None))
    tokenizer.pre_tokenizer = tk.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = tk.decoders.ByteLevel()
    trainer = tk.trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=tk.pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(_corpus(), trainer=trainer)
    probe = tokenizer.encode(TOKEN_TEXT * 16).ids
    if len(probe) != 16:
        raise SystemExit(f"{TOKEN_TEXT!r} x 16 encodes to {len(probe)} tokens, not 16")
    out.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(out / "tokenizer.json"))
    special = {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>"}
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": 1_000_000,
        "clean_up_tokenization_spaces": False,
        "add_bos_token": False,
        "add_eos_token": False,
        **special,
    }
    files = {
        "tokenizer_config.json": config,
        "special_tokens_map.json": special,
        "config.json": {
            "model_type": "gpt2",
            "architectures": ["GPT2LMHeadModel"],
            "vocab_size": tokenizer.get_vocab_size(),
            "bos_token_id": 0,
            "eos_token_id": 0,
            "n_positions": 16384,
            "max_position_embeddings": 16384,
        },
    }
    for name, doc in files.items():
        (out / name).write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")


def main(argv: list[str]) -> int:
    """``build_tokenizer.py OUT_DIR``."""
    if len(argv) != 1:
        print("usage: build_tokenizer.py OUT_DIR", file=sys.stderr)
        return 2
    build(Path(argv[0]))
    print(f"tokenizer written to {argv[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
