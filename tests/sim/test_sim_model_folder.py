"""The model folder's tokenizer.json is the simulator's tokenizer: the real `tokenizers` library
turns the simulator's completion text back into exactly the ids the engine generated."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from tokenizers import Tokenizer
from typer.testing import CliRunner

from narwhal_sim import BOS_ID, VOCAB_SIZE, decode, encode
from narwhal_sim._model_folder import CHAT_TEMPLATE, MODEL_FILES, write_model_folder
from narwhal_sim.cli import app
from narwhal_sim.testing import SimFleet

from ._dynamo_kit import completion, dynamo_fleet, post, sse_data


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Tokenizer:
    """The folder's tokenizer, loaded by the tokenizers library."""
    folder = tmp_path_factory.mktemp("model")
    write_model_folder(folder)
    return Tokenizer.from_file(str(folder / "tokenizer.json"))


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimFleet]:
    """An engine (asked directly for its token ids) behind the Dynamo mimic."""
    with dynamo_fleet(tmp_path_factory.mktemp("model-fleet")) as running:
        yield running


def test_engine_completion_text_encodes_to_its_token_ids(
    fleet: SimFleet, tokenizer: Tokenizer
) -> None:
    """300 generated tokens: the engine's text, encoded without special tokens, is its ids."""
    answer = post(f"{fleet.urls['e0']}/v1/completions",
                  completion(max_tokens=300, return_token_ids=True)).json()  # fmt: skip
    choice = answer["choices"][0]
    assert len(choice["token_ids"]) == 300
    assert tokenizer.encode(choice["text"], add_special_tokens=False).ids == choice["token_ids"]


def test_mimic_streamed_text_encodes_to_the_engine_ids(
    fleet: SimFleet, tokenizer: Tokenizer
) -> None:
    """The Dynamo mimic sends no token ids; its streamed text gives them back, exactly."""
    body = completion(max_tokens=64, stream=True)
    events = sse_data(post(f"{fleet.router_url}/v1/completions", body).text)
    text = "".join(e["choices"][0]["text"] for e in events if e != "[DONE]" and e["choices"])
    direct = post(f"{fleet.urls['e0']}/v1/completions",
                  completion(max_tokens=64, return_token_ids=True))  # fmt: skip
    ids = direct.json()["choices"][0]["token_ids"]
    assert tokenizer.encode(text, add_special_tokens=False).ids == ids


def test_prompts_tokenize_as_the_engine_does(fleet: SimFleet, tokenizer: Tokenizer) -> None:
    """A prompt of spellings: the same ids as the engine's /tokenize, BOS first when special
    tokens are added; decode and encode agree with the simulator's own functions."""
    ids = list(range(256, VOCAB_SIZE, 997))
    text = decode(ids)
    engine = post(f"{fleet.urls['e0']}/tokenize", {"prompt": text}).json()["tokens"]
    assert engine == [BOS_ID, *ids] == tokenizer.encode(text).ids
    assert tokenizer.encode(text, add_special_tokens=False).ids == encode(text) == ids
    assert tokenizer.get_vocab_size() == VOCAB_SIZE
    assert tokenizer.encode("<s>").ids == [BOS_ID, BOS_ID]


def test_cli_writes_the_folder(tmp_path: Path) -> None:
    """`narwhal-sim model-folder --out DIR` writes the three files; the configs name the
    context length, and tokenizer_config.json has the chat template Dynamo requires."""
    out = tmp_path / "m"
    result = CliRunner().invoke(
        app, ["model-folder", "--out", str(out), "--context-length", "4096"]
    )
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == sorted(MODEL_FILES)
    config = orjson.loads((out / "config.json").read_bytes())
    assert (config["vocab_size"], config["max_position_embeddings"]) == (VOCAB_SIZE, 4096)
    tok_config = orjson.loads((out / "tokenizer_config.json").read_bytes())
    assert tok_config["chat_template"] == CHAT_TEMPLATE and tok_config["model_max_length"] == 4096
    file = tmp_path / "file"
    file.write_text("x")
    refused = CliRunner().invoke(app, ["model-folder", "--out", str(file)])
    assert refused.exit_code == 2 and "it exists and is not a folder" in refused.output
