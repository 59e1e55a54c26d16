"""--router-mimic dynamo's /metrics: Dynamo's families, with counts equal to what clients saw
and gauges that hold the router's true numbers of held and queued requests."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from narwhal_sim.testing import SimFleet

from ._dynamo_kit import completion, dynamo_fleet, post, samples, sse_data

LIMITS = {"max_num_seqs": 48, "max_num_batched_tokens": 2048, "block_size": 32}
KV_TOKENS = 64000
M = '{model="tiny"}'


def _requests(kind: str) -> str:
    return (
        'dynamo_frontend_requests_total{endpoint="completions",error_type="",model="tiny",'
        f'request_type="{kind}",status="success"}}'
    )


def _started(kind: str) -> str:
    return (
        'dynamo_frontend_requests_started_total{endpoint="completions",model="tiny",'
        f'request_type="{kind}"}}'
    )


INVALID = 'dynamo_frontend_failures_total{class="InvalidRequest",reason="request.invalid"}'


@pytest.fixture
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimFleet]:
    """A fresh mimic per test (counters start from nothing) before an engine with set limits."""
    engine = {**LIMITS, "kv_cache_tokens": KV_TOKENS}
    with dynamo_fleet(tmp_path_factory.mktemp("dynamo-metrics"), engine=engine) as running:
        yield running


def test_model_gauges_are_the_engine_settings(fleet: SimFleet) -> None:
    """Before any request: the scheduler settings, ready 1, context length 0, gauges 0, and no
    labelled counter or histogram yet."""
    page = samples(str(fleet.router_url))
    assert page[f"dynamo_frontend_model_max_num_seqs{M}"] == 48
    assert page[f"dynamo_frontend_model_max_num_batched_tokens{M}"] == 2048
    assert page[f"dynamo_frontend_model_kv_cache_block_size{M}"] == 32
    assert page[f"dynamo_frontend_model_total_kv_blocks{M}"] == KV_TOKENS // 32
    assert page[f"dynamo_frontend_model_context_length{M}"] == 0
    assert page[f"dynamo_frontend_model_ready{M}"] == 1
    assert page[f"dynamo_frontend_inflight_requests{M}"] == 0
    assert page[f"dynamo_frontend_queued_requests{M}"] == 0
    assert not any(k.startswith("dynamo_frontend_requests_total") for k in page)
    assert not any(k.startswith(("vllm:", "narwhal_")) for k in page)


def test_counters_equal_what_clients_saw(fleet: SimFleet) -> None:
    """After 4 streams, 2 unary requests and one refused: each counter exactly; the tokens the
    clients got are the output counter; the gauges read 0 once the answers are in."""
    url = f"{fleet.router_url}/v1/completions"
    tokens = 0
    for k in range(4):
        body = completion(max_tokens=3 + k, stream=True, stream_options={"include_usage": True})
        events = sse_data(post(url, body).text)
        tokens += sum(len(e["choices"][0]["text"].split()) for e in events[:-2] if e["choices"])
    for k in range(2):
        tokens += post(url, completion(max_tokens=2 + k)).json()["usage"]["completion_tokens"]
    assert post(url, completion(return_token_ids=True)).status_code == 400
    assert tokens == (3 + 4 + 5 + 6) + (2 + 3)
    page = samples(str(fleet.router_url))
    assert page[_started("stream")] == 4 and page[_requests("stream")] == 4
    assert page[_started("unary")] == 2 and page[_requests("unary")] == 2
    assert page[INVALID] == 1
    assert page[f"dynamo_frontend_output_tokens_total{M}"] == tokens
    assert page[f"dynamo_frontend_time_to_first_token_seconds_count{M}"] == 6
    assert page['dynamo_frontend_time_to_first_token_seconds_bucket{model="tiny",le="+Inf"}'] == 6
    assert page[f"dynamo_frontend_inter_token_latency_seconds_count{M}"] == tokens - 6
    assert page[f"dynamo_frontend_output_sequence_tokens_sum{M}"] == tokens
    assert page[f"dynamo_frontend_input_sequence_tokens_sum{M}"] == 6 * 8
    assert page[f"dynamo_frontend_request_duration_seconds_count{M}"] == 6
    assert page[f"dynamo_frontend_inflight_requests{M}"] == 0
    assert page[f"dynamo_frontend_queued_requests{M}"] == 0
    assert page[f"dynamo_frontend_active_requests{M}"] == 0


def test_gauges_hold_the_requests_the_router_holds(fleet: SimFleet) -> None:
    """With the engine stalled, 3 requests are in flight and queued (no token yet); once it
    runs again they finish and both gauges read 0."""
    fleet.set_faults("e0", stall=True)
    url = f"{fleet.router_url}/v1/completions"
    answers: list[httpx.Response] = []
    threads = [
        threading.Thread(target=lambda: answers.append(post(url, completion(max_tokens=2))))
        for _ in range(3)
    ]
    for thread in threads:
        thread.start()
    try:
        deadline = time.monotonic() + 20
        while True:
            page = samples(str(fleet.router_url))
            held = (page[f"dynamo_frontend_inflight_requests{M}"],
                    page[f"dynamo_frontend_queued_requests{M}"])  # fmt: skip
            if held == (3.0, 3.0) or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        assert held == (3.0, 3.0)
    finally:
        fleet.set_faults("e0", stall=None)
        for thread in threads:
            thread.join(timeout=30)
    assert [a.status_code for a in answers] == [200] * 3
    page = samples(str(fleet.router_url))
    assert page[f"dynamo_frontend_inflight_requests{M}"] == 0
    assert page[f"dynamo_frontend_queued_requests{M}"] == 0
    assert page[_requests("unary")] == 3


def test_engine_errors_are_counted_as_errors(fleet: SimFleet) -> None:
    """An engine's 503 reaches the client in Dynamo's shape and counts as an error, not a
    success; the frontend's own failure counter is for its refusals only."""
    fleet.set_faults("e0", http_error={"status": 503, "rate": 1.0})
    try:
        answer = post(f"{fleet.router_url}/v1/completions", completion(max_tokens=2))
    finally:
        fleet.set_faults("e0", http_error=None)
    assert answer.status_code == 503
    assert set(answer.json()) == {"message", "type", "code"} and answer.json()["code"] == 503
    page = samples(str(fleet.router_url))
    errors = {k: v for k, v in page.items() if k.startswith("dynamo_frontend_requests_total")}
    assert errors == {
        'dynamo_frontend_requests_total{endpoint="completions",error_type="internal",'
        'model="tiny",request_type="unary",status="error"}': 1.0
    }
    assert not any(k.startswith("dynamo_frontend_failures_total") for k in page)
