"""Build the conformance model folder: a tiny llama config and a locally trained tokenizer.

Runs with the vLLM venv's interpreter (it has the ``tokenizers`` package)::

    VENV/bin/python tools/conformance/build_model.py OUT_DIR

Nothing comes from a model hub. The weights are random (``vllm serve --load-format dummy``); the
tokenizer is a byte-level BPE trained here on English text the Python standard library ships
(``pydoc_data.topics``, the language reference behind ``help()``), so ordinary English splits into
many distinct ids. Prints one JSON line: the vocabulary size and how many distinct ids each
required text gives (the profiler's pool text and the trial's seed prompt, read from their
sources in this checkout), and exits 1 when either gives fewer than 32.
"""

from __future__ import annotations

import ast
import importlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
VOCAB_SIZE = 8192
MIN_DISTINCT = 32
EOS = "<|endoftext|>"
#: (source file, constant name) of every text that must split into >= MIN_DISTINCT ids.
REQUIRED_TEXTS = {
    "profile POOL_TEXT": (
        REPO / "packages/narwhal-profile-cli/src/narwhal_profile_cli/sweeps/_prompts.py",
        "POOL_TEXT",
    ),
    "trial SEED_PROMPT": (
        REPO / "packages/narwhal-trial/src/narwhal_trial/workload/_seed_text.py",
        "SEED_PROMPT",
    ),
}

#: A small llama (about 40 M parameters). Its decode step takes ~8 ms on one core of these
#: machines; with 2 layers of 256 a step took ~2 ms and vLLM's API server, sharing the other
#: core, fell so far behind that it delivered whole streams in one burst (docs/conformance.md).
LLAMA = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 768,
    "intermediate_size": 2048,
    "num_hidden_layers": 4,
    "num_attention_heads": 12,
    "num_key_value_heads": 12,
    "head_dim": 64,
    "hidden_act": "silu",
    "max_position_embeddings": 4096,
    "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "bos_token_id": 0,
    "eos_token_id": 0,
}


def corpus() -> Iterator[str]:
    """English paragraphs from the standard library's pydoc topics."""
    topics: dict[str, str] = importlib.import_module("pydoc_data.topics").topics
    for name in sorted(topics):
        yield from (part for part in topics[name].split("\n\n") if part.strip())


def constant(path: Path, name: str) -> str:
    """A module-level string constant, read from source without importing the module."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == name for t in node.targets)
            and isinstance(node.value, ast.expr)
        ):
            value = ast.literal_eval(node.value)
            if isinstance(value, str):
                return value
    raise SystemExit(f"build_model: {path} defines no string constant {name}")


def train() -> Any:
    """A byte-level BPE tokenizer trained on ``corpus()``."""
    tk: Any = importlib.import_module("tokenizers")
    tokenizer = tk.Tokenizer(tk.models.BPE(unk_token=None))
    tokenizer.pre_tokenizer = tk.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = tk.decoders.ByteLevel()
    trainer = tk.trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=[EOS],
        initial_alphabet=tk.pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(corpus(), trainer=trainer)
    return tokenizer


def build(out: Path) -> dict[str, int]:
    """Write the model folder; return the vocabulary size and the distinct-id counts."""
    tokenizer = train()
    report = {"vocab_size": int(tokenizer.get_vocab_size())}
    for label, (path, name) in REQUIRED_TEXTS.items():
        report[label] = len(set(tokenizer.encode(constant(path, name)).ids))
    out.mkdir(mode=0o700, parents=True, exist_ok=True)
    tokenizer.save(str(out / "tokenizer.json"))
    special = {"bos_token": EOS, "eos_token": EOS}
    files: dict[str, dict[str, Any]] = {
        "config.json": {**LLAMA, "vocab_size": report["vocab_size"]},
        "tokenizer_config.json": {
            "tokenizer_class": "PreTrainedTokenizerFast",
            "model_max_length": 1_000_000,
            "clean_up_tokenization_spaces": False,
            "add_bos_token": False,
            "add_eos_token": False,
            **special,
        },
        "special_tokens_map.json": special,
        "generation_config.json": {"bos_token_id": 0, "eos_token_id": 0},
    }
    for name, doc in files.items():
        (out / name).write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    return report


def main(argv: list[str]) -> int:
    """``build_model.py OUT_DIR``."""
    if len(argv) != 1:
        print("usage: build_model.py OUT_DIR", file=sys.stderr)
        return 2
    report = build(Path(argv[0]))
    print(json.dumps(report, sort_keys=True))
    short = [label for label in REQUIRED_TEXTS if report[label] < MIN_DISTINCT]
    if short:
        print(f"build_model: fewer than {MIN_DISTINCT} distinct ids: {short}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
