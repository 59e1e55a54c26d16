"""A HuggingFace model folder whose tokenizer is the simulator's own toy tokenizer.

``write_model_folder(folder)`` writes ``tokenizer.json`` (a ``WordLevel`` model over the 32,000 ids
of ``narwhal_sim._tokenizer``: every ordinary id's six-letter spelling, ``<s>`` = 1, ``</s>`` = 2,
``<0xNN>`` for the other ids below 256; a ``Whitespace`` pre-tokenizer; ``<s>`` prepended when
special tokens are asked for), ``tokenizer_config.json`` (with the ``chat_template`` that NVIDIA
Dynamo's frontend insists on) and a small llama ``config.json``. So the real ``tokenizers`` library
turns the simulator's completion text (``" " + spelling`` per token) back into exactly its ids:
``Tokenizer.from_file(folder / "tokenizer.json").encode(text, add_special_tokens=False).ids``.
The JSON is written by hand: the simulator does not depend on ``tokenizers``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from narwhal_sim import _tokenizer as tok
from narwhal_sim._errors import SimConfigError
from narwhal_sim._fleet import write_atomic

MODEL_FILES = ("config.json", "tokenizer.json", "tokenizer_config.json")
CHAT_TEMPLATE = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
"""The messages' contents run together (Dynamo refuses a tokenizer_config.json without one)."""
_UNK = tok.word(0)  # "<0x00>": the simulator never emits it; HF needs an unknown token


def _added(token_id: int) -> dict[str, Any]:
    return {
        "id": token_id,
        "content": tok.word(token_id),
        "single_word": False,
        "lstrip": False,
        "rstrip": False,
        "normalized": False,
        "special": True,
    }


def tokenizer_document() -> dict[str, Any]:
    """The ``tokenizer.json`` document (a ``tokenizers`` 1.0 serialization)."""
    bos = tok.word(tok.BOS_ID)
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [_added(i) for i in (0, tok.BOS_ID, tok.EOS_ID)],
        "normalizer": None,
        "pre_tokenizer": {"type": "Whitespace"},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [
                {"SpecialToken": {"id": bos, "type_id": 0}},
                {"Sequence": {"id": "A", "type_id": 0}},
            ],
            "pair": [
                {"SpecialToken": {"id": bos, "type_id": 0}},
                {"Sequence": {"id": "A", "type_id": 0}},
                {"Sequence": {"id": "B", "type_id": 1}},
            ],
            "special_tokens": {bos: {"id": bos, "ids": [tok.BOS_ID], "tokens": [bos]}},
        },
        "decoder": None,
        "model": {
            "type": "WordLevel",
            "vocab": {tok.word(i): i for i in range(tok.VOCAB_SIZE)},
            "unk_token": _UNK,
        },
    }


def _tokenizer_config(context_length: int) -> dict[str, Any]:
    return {
        "add_bos_token": True,
        "add_eos_token": False,
        "bos_token": tok.word(tok.BOS_ID),
        "eos_token": tok.word(tok.EOS_ID),
        "unk_token": _UNK,
        "chat_template": CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "model_max_length": context_length,
        "tokenizer_class": "PreTrainedTokenizerFast",
    }


def _config(context_length: int) -> dict[str, Any]:
    """A tiny llama architecture (only the vocabulary and the context length matter)."""
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": tok.VOCAB_SIZE,
        "bos_token_id": tok.BOS_ID,
        "eos_token_id": tok.EOS_ID,
        "max_position_embeddings": context_length,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "num_hidden_layers": 2,
        "rms_norm_eps": 1e-5,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
    }


def write_model_folder(folder: Path, *, context_length: int = 131072) -> list[Path]:
    """Write ``config.json``, ``tokenizer.json`` and ``tokenizer_config.json`` into ``folder``
    (created; files replaced atomically) and return their paths. ``context_length`` is the
    config's ``max_position_embeddings`` and the tokenizer's ``model_max_length``. A folder that is
    a file, or a ``context_length`` that is not a positive int, is a SimConfigError naming it."""
    if isinstance(context_length, bool) or not isinstance(context_length, int):
        raise SimConfigError(f"context_length: expected a positive int, got {context_length!r}")
    if context_length < 1:
        raise SimConfigError(f"context_length: expected a positive int, got {context_length!r}")
    if folder.exists() and not folder.is_dir():
        raise SimConfigError(f"model folder {folder}: it exists and is not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SimConfigError(f"model folder {folder}: {exc.strerror or exc}") from exc
    documents = {
        "config.json": _config(context_length),
        "tokenizer.json": tokenizer_document(),
        "tokenizer_config.json": _tokenizer_config(context_length),
    }
    written = []
    for name in MODEL_FILES:
        path = folder / name
        write_atomic(path, orjson.dumps(documents[name], option=orjson.OPT_INDENT_2) + b"\n")
        written.append(path)
    return written
