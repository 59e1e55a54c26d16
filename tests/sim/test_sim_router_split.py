"""Disaggregated serving behind the router: prefill engine first, then the decode engine streams.

Assertions use the journal and the engines' own stamps (simulated seconds), never wall time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from narwhal_engine_client import EngineClient, completion_body
from narwhal_sim import get_preset, idle_ttft_s, prefill_chunk_s
from narwhal_sim.testing import SimFleet, sim_config, start_sim_fleet

from .conftest import journal_by_id

PROMPT = 8000
TRANSFER_S_PER_TOKEN = 2e-6  # 16 ms for the prompt's KV


@pytest.fixture(scope="module")
def split(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimFleet]:
    """A prefill engine, a decode engine and a mixed engine, each on its own device."""
    engines = [
        {"iid": "p", "role": "prefill", "model": "m"},
        {"iid": "d", "role": "decode", "model": "m"},
        {"iid": "mx", "role": "mixed", "model": "m"},
    ]
    cfg = sim_config({"jitter": 0.0}, d={"kv_transfer_s_per_token": TRANSFER_S_PER_TOKEN})
    with start_sim_fleet(
        tmp_path_factory.mktemp("split"), engines, sim_config=cfg, router=True
    ) as fleet:
        yield fleet


async def _metrics(fleet: SimFleet, iid: str) -> dict[str, float | None]:
    async with EngineClient(fleet.urls[iid]) as client:
        snap = await client.metrics()
    return {
        name: snap.sum(name)
        for name in (
            "vllm:prompt_tokens_total",
            "vllm:generation_tokens_total",
            "vllm:time_to_first_token_seconds_sum",
            "vllm:time_to_first_token_seconds_count",
        )
    }


def _body(tokens: int = 20) -> dict[str, object]:
    return completion_body(
        model="m", prompt=[300 + k % 500 for k in range(PROMPT)], max_tokens=tokens
    )


async def test_split_request_prefills_once_then_decodes(split: SimFleet) -> None:
    """A lone request goes to the decode engine (first in fleet order among decode/mixed), which
    gets the prompt's KV from the prefill engine: the prefill engine computes the prompt and
    emits one token, the decode engine pays the transfer and one step, never the prefill."""
    before = {iid: await _metrics(split, iid) for iid in ("p", "d")}
    async with EngineClient(split.router_url or "") as client:
        rec = await client.stream_completion(_body(), request_id="split-1")
    assert rec.ok and rec.completion_tokens == 20
    entry = journal_by_id(split, "split-1")["split-1"]
    assert (entry["engine"], entry["prefill_engine"], entry["status"]) == ("d", "p", "ok")
    assert entry["completion_tokens"] == 20 and entry["prompt_tokens"] == PROMPT
    stamps = [entry[k] for k in ("arrival", "prefill_end", "first_token", "end")]
    assert all(isinstance(t, float) for t in stamps) and stamps == sorted(stamps)
    after = {iid: await _metrics(split, iid) for iid in ("p", "d")}

    def delta(iid: str, name: str) -> float:
        return float(after[iid][name] or 0) - float(before[iid][name] or 0)

    preset = get_preset()
    # the prefill engine: the whole prompt, max_tokens 1
    assert delta("p", "vllm:prompt_tokens_total") == PROMPT
    assert delta("p", "vllm:generation_tokens_total") == 1
    prefill_ttft = delta("p", "vllm:time_to_first_token_seconds_sum")
    assert prefill_ttft >= idle_ttft_s(preset, PROMPT) * 0.999
    # the decode engine: all 20 tokens, first after the transfer and a one-token step
    assert delta("d", "vllm:generation_tokens_total") == 20
    decode_ttft = delta("d", "vllm:time_to_first_token_seconds_sum")
    floor = (
        preset.api_overhead
        + TRANSFER_S_PER_TOKEN * PROMPT
        + preset.d0
        + prefill_chunk_s(preset, PROMPT - 1, 1)
    )
    assert floor * 0.999 <= decode_ttft < floor + 0.5 * (prefill_ttft - floor)
    assert decode_ttft < idle_ttft_s(preset, PROMPT) / 3  # no second prefill


async def test_mixed_engine_serves_whole_requests(split: SimFleet) -> None:
    """With the decode engine busy, the next request goes whole to the mixed engine."""
    async with EngineClient(split.router_url or "") as client:
        records = await asyncio.gather(
            *(client.stream_completion(_body(60), request_id=f"pair-{k}") for k in range(2))
        )
    assert all(r.ok and r.completion_tokens == 60 for r in records)
    journal = journal_by_id(split, "pair-0", "pair-1")
    entries = {str(journal[f"pair-{k}"]["engine"]): journal[f"pair-{k}"] for k in range(2)}
    assert set(entries) == {"d", "mx"}
    assert entries["d"]["prefill_engine"] == "p" and isinstance(entries["d"]["prefill_end"], float)
    assert entries["mx"]["prefill_engine"] is None and entries["mx"]["prefill_end"] is None


async def test_prefill_refusal_is_relayed(split: SimFleet) -> None:
    """A prefill engine's error answer is the client's answer; the journal names both engines."""
    split.set_faults("p", http_error={"status": 503, "rate": 1.0})
    try:
        async with EngineClient(split.router_url or "") as client:
            rec = await client.stream_completion(_body(), request_id="split-refused")
            snap = await client.metrics()
    finally:
        split.set_faults("p", http_error=None)
    assert rec.http_status == 503
    entry = journal_by_id(split, "split-refused")["split-refused"]
    assert (entry["engine"], entry["prefill_engine"]) == ("d", "p")
    assert (entry["status"], entry["http_status"], entry["first_token"]) == ("error", 503, None)
    assert snap.value("narwhal_router_admission_queue_depth") == 0.0
    assert snap.value("narwhal_router_resident_requests") == 0.0
