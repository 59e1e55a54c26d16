"""--router-mimic dynamo refuses what Dynamo 1.6.1's frontend refuses, with its bodies, and
forwards none of it to an engine."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from narwhal_sim.testing import SimFleet

from ._dynamo_kit import completion, dynamo_fleet, post, samples


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimFleet]:
    """A Dynamo-mimic router in front of one engine that never gets a completion here."""
    with dynamo_fleet(tmp_path_factory.mktemp("dynamo-refusals")) as running:
        yield running


UNSUPPORTED = [
    ({"return_token_ids": True, "add_special_tokens": False},
     "`return_token_ids`, `add_special_tokens`"),
    ({"add_special_tokens": True, "return_token_ids": True},
     "`add_special_tokens`, `return_token_ids`"),
    ({"return_token_ids": False}, "`return_token_ids`"),  # present is enough, whatever the value
    ({"add_special_tokens": False, "stream": True, "stream_options": {"include_usage": True}},
     "`add_special_tokens`"),
]  # fmt: skip


@pytest.mark.parametrize(("fields", "named"), UNSUPPORTED)
def test_unsupported_fields_are_a_400_naming_exactly_them(
    fleet: SimFleet, fields: dict[str, Any], named: str
) -> None:
    """Each unsupported field present is named, backticked, in the body's order."""
    answer = post(f"{fleet.router_url}/v1/completions", completion(max_tokens=2, **fields))
    assert answer.status_code == 400
    assert answer.headers["content-type"] == "application/json"
    assert answer.text == (
        f'{{"message":"Validation: Unsupported parameter(s): {named}",'
        '"type":"Bad Request","code":400}'
    )


def test_other_refusals_have_dynamo_bodies(fleet: SimFleet) -> None:
    """Bad JSON, a missing model and stream_options without stream are 400s; an unknown model
    is a 404; all in Dynamo's {"message", "type", "code"} shape."""
    url = f"{fleet.router_url}/v1/completions"
    bad_json = post(url, b"not json")
    assert bad_json.status_code == 400
    assert bad_json.json()["message"].startswith(
        "Failed to deserialize the JSON body into the target type: "
    )
    no_model = post(url, {"prompt": "x"}).json()
    assert no_model["type"] == "Bad Request" and "missing field `model`" in no_model["message"]
    options = post(url, completion(stream_options={"include_usage": True}))
    assert options.status_code == 400
    assert options.json() == {
        "message": "Validation: The 'stream_options' field is only allowed when 'stream' is "
        "set to true.",
        "type": "Bad Request",
        "code": 400,
    }
    unknown = post(url, {"model": "nope", "prompt": "x"})
    assert unknown.status_code == 404
    assert unknown.json() == {"message": "Model not found", "type": "Not Found", "code": 404}


def test_refused_requests_reach_no_engine(fleet: SimFleet) -> None:
    """After every refusal above (and one more), the engine has served no completion and the
    frontend counted each 400 as an InvalidRequest failure."""
    before = samples(str(fleet.router_url))
    key = 'dynamo_frontend_failures_total{class="InvalidRequest",reason="request.invalid"}'
    answer = post(f"{fleet.router_url}/v1/completions", completion(add_special_tokens=True))
    assert answer.status_code == 400
    after = samples(str(fleet.router_url))
    assert after[key] == before.get(key, 0.0) + 1
    state = fleet.state("e0")
    assert state["completions_first_s"] is None and state["running"] == state["waiting"] == 0
    assert not any(k.startswith("dynamo_frontend_output_tokens_total") for k in after)
