"""--router-mimic dynamo serves Dynamo's routes: 404 bodies for vLLM's extra routes, model cards
with ``context_window`` (0 by default, --router-context-length N), /health and /live."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from narwhal_sim.cli import app
from narwhal_sim.testing import SimFleet

from ._dynamo_kit import MODEL, dynamo_fleet, post

CARD_KEYS = ["id", "object", "created", "owned_by", "context_window"]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimFleet]:
    """The mimic with the default context length."""
    with dynamo_fleet(tmp_path_factory.mktemp("dynamo-routes")) as running:
        yield running


@pytest.mark.parametrize(
    ("method", "path"),
    [("POST", "/tokenize"), ("POST", "/detokenize"), ("GET", "/version"),
     ("GET", "/server_info"), ("GET", "/tokenize")],
)  # fmt: skip
def test_vllm_only_routes_are_dynamo_404s(fleet: SimFleet, method: str, path: str) -> None:
    """Routes Dynamo does not have answer its 404 body, naming the method and the path."""
    answer = httpx.request(method, f"{fleet.router_url}{path}", content=b"{}", timeout=10)
    assert answer.status_code == 404
    assert answer.text == (
        f'{{"message":"Route not found: {method} {path}","type":"Not Found","code":404}}'
    )


def test_model_cards_carry_context_window_and_no_max_model_len(fleet: SimFleet) -> None:
    """/v1/models lists Dynamo's card (owned_by nvidia, context_window 0); /v1/models/ID gives
    the card alone, an unknown id is a 404; the engine itself still reports max_model_len."""
    listing = httpx.get(f"{fleet.router_url}/v1/models", timeout=10).json()
    assert listing["object"] == "list" and len(listing["data"]) == 1
    card = listing["data"][0]
    assert list(card) == CARD_KEYS
    assert (card["id"], card["owned_by"], card["context_window"]) == (MODEL, "nvidia", 0)
    alone = httpx.get(f"{fleet.router_url}/v1/models/{MODEL}", timeout=10).json()
    assert list(alone) == CARD_KEYS and alone["context_window"] == 0
    missing = httpx.get(f"{fleet.router_url}/v1/models/other", timeout=10)
    assert missing.status_code == 404 and missing.json()["message"] == "Model not found"
    engine = httpx.get(f"{fleet.urls['e0']}/v1/models", timeout=10).json()["data"][0]
    assert isinstance(engine["max_model_len"], int)


def test_health_and_live(fleet: SimFleet) -> None:
    """/health says healthy with one instance per engine; /live says live."""
    health = httpx.get(f"{fleet.router_url}/health", timeout=10)
    assert health.status_code == 200
    assert health.json()["status"] == "healthy" and len(health.json()["instances"]) == 1
    live = httpx.get(f"{fleet.router_url}/live", timeout=10).json()
    assert live == {"status": "live", "message": "Service is live"}
    wrong = httpx.get(f"{fleet.router_url}/v1/completions", timeout=10)
    assert wrong.status_code == 405 and wrong.headers["allow"] == "POST"


def test_configured_context_length_is_reported(tmp_path: Path) -> None:
    """--router-context-length N is the cards' context_window and the context-length gauge."""
    with dynamo_fleet(tmp_path, options=("--router-context-length", "4096")) as running:
        card = httpx.get(f"{running.router_url}/v1/models", timeout=10).json()["data"][0]
        page = httpx.get(f"{running.router_url}/metrics", timeout=10).text
        answer = post(f"{running.router_url}/v1/completions",
                      {"model": MODEL, "prompt": "a b", "max_tokens": 2})  # fmt: skip
    assert card["context_window"] == 4096
    assert 'dynamo_frontend_model_context_length{model="tiny"} 4096\n' in page
    assert answer.status_code == 200


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--router-mimic", "triton"], "--router-mimic: unknown 'triton' (use dynamo)"),
        (["--router-context-length", "8"], "--router-context-length needs --router-mimic dynamo"),
        (["--router-mimic", "dynamo", "--router-context-length", "-1"], "must be 0 or more"),
        (["--router-mimic", "dynamo", "--router-omit", "tokenize"], "cannot be combined"),
    ],
)
def test_bad_mimic_options_are_one_line_errors(extra: list[str], message: str) -> None:
    """Unknown mimics, a context length without the mimic or below 0, and --router-omit with
    the mimic exit 2 naming the value."""
    fleet = Path(__file__).resolve().parents[2] / "examples" / "sim-fleet.json"
    args = ["up", "--fleet", str(fleet), "--router", "127.0.0.1:1", *extra]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    assert message in result.output


def test_mimic_options_need_a_router() -> None:
    """--router-mimic without --router is refused."""
    fleet = Path(__file__).resolve().parents[2] / "examples" / "sim-fleet.json"
    result = CliRunner().invoke(app, ["up", "--fleet", str(fleet), "--router-mimic", "dynamo"])
    assert result.exit_code == 2 and "need --router" in result.output


def test_help_documents_the_mimic() -> None:
    """`narwhal-sim up --help` names the options."""
    result = CliRunner().invoke(app, ["up", "--help"], env={"COLUMNS": "200"})
    assert "--router-mimic" in result.output and "--router-context-length" in result.output
