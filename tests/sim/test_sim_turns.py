"""The ``scheduler`` setting: ``shared`` steps (chunked prefill) and ``turns`` (prefill and decode
steps alternate).

The scheduler is driven step by step (``plan`` then ``commit`` at the plan's end), or on the
virtual clock for engines sharing a device, so every assertion is exact and no wall time is read.
"""

from __future__ import annotations

import asyncio
import json
import math
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import pytest
from typer.testing import CliRunner

from narwhal_engine_client import EngineClient, completion_body
from narwhal_sim import SimConfigError, decode_step_s, get_preset, prefill_chunk_s
from narwhal_sim.cli import app
from narwhal_sim.model._config import resolve_engines
from narwhal_sim.model._scheduler import (
    EngineScheduler,
    SchedulerMode,
    SimRequest,
    StepObserver,
    StepPlan,
)
from narwhal_sim.testing import (
    TokenStamps,
    VirtualGpu,
    run_on_virtual_clock,
    sim_config,
    start_sim_fleet,
)
from narwhal_store import FleetConfig

PRESET = get_preset("h200-llama-3.1-8b").with_overrides(jitter=0.0)
BUDGET = 256  # max_num_batched_tokens: a 1000-token prompt takes 4 chunks
PROMPT = 1000
DECODERS = 4


class _Sink:
    """TokenSink that keeps each request's token times."""

    def __init__(self) -> None:
        self.tokens: dict[str, list[float]] = {}

    def on_tokens(self, request: SimRequest, count: int, finished: bool) -> None:
        assert request.last_token_at is not None
        self.tokens.setdefault(request.rid, []).extend([request.last_token_at] * count)

    def on_abort(self, request: SimRequest) -> None:
        raise AssertionError(f"{request.rid} aborted")


@dataclass
class _Metrics:
    """What the engine's observer reports (as ``EngineStats`` would record it)."""

    ttft: dict[str, float] = field(default_factory=dict)
    gaps: list[float] = field(default_factory=list)
    gap_tokens: int = 0
    e2e: dict[str, float] = field(default_factory=dict)

    def first(self, r: SimRequest, ttft: float) -> None:
        self.ttft[r.rid] = ttft

    def gap(self, gap: float, tokens: int) -> None:
        self.gaps.append(gap)
        self.gap_tokens += tokens

    def finish(self, r: SimRequest, e2e: float) -> None:
        self.e2e[r.rid] = e2e


class _Stepper:
    """One engine stepped by hand: each planned step commits at ``now + cost``."""

    def __init__(self, mode: SchedulerMode | None = None) -> None:
        """An engine in ``mode`` (None: the default)."""
        self.metrics = _Metrics()
        make = partial(
            EngineScheduler,
            preset=PRESET,
            max_num_seqs=64,
            max_num_batched_tokens=BUDGET,
            kv_cache_tokens=PRESET.kv_cache_tokens,
            block_size=PRESET.block_size,
            observer=StepObserver(self.metrics.first, self.metrics.gap, self.metrics.finish),
        )
        self.engine = make() if mode is None else make(mode=mode)
        self.sink = _Sink()
        self.now = 0.0
        self.plans: list[StepPlan] = []
        self.ctx: list[int] = []  # each plan's Σctx of its decoding sequences, as planned
        self.ends: list[float] = []  # each step's end
        self.arrivals: dict[str, float] = {}

    def submit(self, rid: str, prompt_len: int, tokens: int) -> str:
        self.arrivals[rid] = self.now
        self.engine.submit(SimRequest(rid, prompt_len, tokens, self.sink, self.now, self.now))
        return rid

    def step(self) -> StepPlan:
        plan = self.engine.plan(self.now)
        assert plan is not None
        self.ctx.append(sum(r.prompt_len + r.generated for r in plan.decode))
        self.now += plan.cost
        self.engine.commit(plan, self.now, 1.0)
        self.plans.append(plan)
        self.ends.append(self.now)
        return plan

    def decoding(self, count: int = DECODERS, tokens: int = 40) -> list[str]:
        """``count`` short requests, prefilled in one step: decoding from then on."""
        rids = [self.submit(f"d{i}", 32, tokens) for i in range(count)]
        self.step()
        assert all(len(self.sink.tokens[r]) == 1 for r in rids)
        return rids

    def tokens_of(self, rid: str) -> list[float]:
        return self.sink.tokens.get(rid, [])


def test_shared_is_the_default_and_mixes_decode_and_prefill() -> None:
    """Shared mode (the default) is unchanged: each step carries a token for every decoding
    sequence plus a chunk within what the decode tokens left of the budget, and costs one d0."""
    run = _Stepper()
    assert run.engine.mode == "shared"
    decoders = run.decoding()
    start = len(run.plans)
    run.submit("long", PROMPT, 8)
    while not run.tokens_of("long"):
        run.step()
    mixed = run.plans[start:]
    assert [p.kind for p in mixed] == ["shared"] * 4
    assert [take for p in mixed for _, take in p.chunks] == [252, 252, 252, 244]
    done = 0
    for p, ctx in zip(mixed, run.ctx[start:], strict=True):
        assert len(p.decode) == DECODERS
        ((_, take),) = p.chunks
        expected = decode_step_s(PRESET, DECODERS, ctx) + prefill_chunk_s(PRESET, done, take)
        assert p.cost == expected  # the same arithmetic, bit for bit
        done += take
    assert all(len(run.tokens_of(d)) == 1 + 4 for d in decoders)  # a token in every step


def test_turns_alternate_prefill_and_decode_steps() -> None:
    """Turns mode: with both kinds of work the steps alternate, prefill steps cost d0 plus their
    chunks (whole budget, no tokens), decode steps cost the decode model (no chunks); with one
    kind of work only, every step is of that kind."""
    run = _Stepper("turns")
    run.submit("alone", PROMPT, 1)  # prefill work only: four prefill steps in a row
    while not run.tokens_of("alone"):
        run.step()
    assert [p.kind for p in run.plans] == ["prefill"] * 4
    decoders = run.decoding()
    for _ in range(3):  # decode work only: decode steps
        assert run.step().kind == "decode"
    start = len(run.plans)
    run.submit("long", PROMPT, 8)
    while not run.tokens_of("long"):
        run.step()
    run.step()
    steps = run.plans[start:]
    assert [p.kind for p in steps] == ["prefill", "decode"] * 4
    assert [take for p in steps for _, take in p.chunks] == [256, 256, 256, 232]
    done = 0
    for p, ctx in zip(steps, run.ctx[start:], strict=True):
        if p.kind == "prefill":
            assert not p.decode
            ((_, take),) = p.chunks
            assert p.cost == decode_step_s(PRESET, 0, 0) + prefill_chunk_s(PRESET, done, take)
            assert p.cost == PRESET.d0 + prefill_chunk_s(PRESET, done, take)
            done += take
        else:
            assert not p.chunks
            assert p.cost == decode_step_s(PRESET, len(p.decode), ctx)
    assert [len(p.decode) for p in steps[1::2]] == [DECODERS] * 3 + [DECODERS + 1]
    assert all(len(run.tokens_of(d)) == 1 + 3 + 4 for d in decoders)  # none in prefill steps


def _decode_time_over_prefill(mode: SchedulerMode, *, with_prefill: bool, tokens: int) -> float:
    """Time the decoding streams take for ``tokens`` tokens from the moment a 1000-token prompt
    (one output token, so the batch stays the same) arrives; the same without the prompt."""
    run = _Stepper(mode)
    decoders = run.decoding(tokens=tokens + 2)
    start = run.now
    if with_prefill:
        run.submit("long", PROMPT, 1)
    while len(run.tokens_of(decoders[0])) < 1 + tokens:
        run.step()
    if with_prefill:
        assert run.tokens_of("long")  # the prompt was prefilled inside the window
        assert sum(1 for p in run.plans if any(r.rid == "long" for r, _ in p.chunks)) == 4
    ends = {run.tokens_of(d)[tokens] for d in decoders}
    assert len(ends) == 1  # the decoding streams move together
    return ends.pop() - start


def test_turns_cost_decoding_streams_d0_per_chunk() -> None:
    """Over a 4-chunk prefill, the decoding streams lose the chunks' own cost in both modes, and
    in turns mode a whole step's fixed cost d0 per chunk on top."""
    tokens = 12
    extra: dict[str, float] = {}
    modes: tuple[SchedulerMode, ...] = ("shared", "turns")
    for mode in modes:
        alone = _decode_time_over_prefill(mode, with_prefill=False, tokens=tokens)
        busy = _decode_time_over_prefill(mode, with_prefill=True, tokens=tokens)
        extra[mode] = busy - alone
    assert _decode_time_over_prefill(
        "shared", with_prefill=False, tokens=tokens
    ) == _decode_time_over_prefill("turns", with_prefill=False, tokens=tokens)
    chunks = math.ceil(PROMPT / BUDGET)
    own = chunks * PRESET.chunk_overhead + PRESET.b * PROMPT + PRESET.c * PROMPT * PROMPT
    assert extra["shared"] == pytest.approx(own, rel=1e-9)
    assert extra["turns"] - extra["shared"] == pytest.approx(chunks * PRESET.d0, rel=1e-9)


def test_turns_metrics_stay_consistent() -> None:
    """In turns mode the observer's TTFT, inter-token gaps and E2E agree with the token times:
    a decoding stream's gap over a prefill step spans both steps."""
    run = _Stepper("turns")
    decoders = run.decoding(tokens=12)
    run.submit("long", PROMPT, 6)
    while run.engine.running:
        run.step()
    generated = 0
    for rid, times in run.sink.tokens.items():
        generated += len(times)
        assert run.metrics.ttft[rid] == pytest.approx(times[0] - run.arrivals[rid], rel=1e-12)
        assert run.metrics.e2e[rid] == pytest.approx(times[-1] - run.arrivals[rid], rel=1e-12)
    assert run.metrics.gap_tokens == generated - len(run.sink.tokens)  # every token but firsts
    spans = sum(t[-1] - t[0] for t in run.sink.tokens.values())
    assert sum(run.metrics.gaps) == pytest.approx(spans, rel=1e-12)
    i = next(i for i, p in enumerate(run.plans) if p.kind == "prefill" and i > 0)
    assert [p.kind for p in run.plans[i - 1 : i + 2]] == ["decode", "prefill", "decode"]
    gap = run.ends[i + 1] - run.ends[i - 1]  # a decoding stream's gap over the prefill step
    assert gap == pytest.approx(run.plans[i].cost + run.plans[i + 1].cost, rel=1e-12)
    for d in decoders:
        times = run.tokens_of(d)
        assert run.ends[i] not in times and [run.ends[i - 1], run.ends[i + 1]] == [
            t for t in times if run.ends[i - 1] <= t <= run.ends[i + 1]
        ]
    assert run.metrics.gaps.count(gap) >= DECODERS


def test_turns_engines_share_a_device() -> None:
    """On one device a turns engine picks its own step kinds while its shared neighbour decodes
    every device step: the neighbour's streams tick through the turns engine's prefill steps."""

    async def scenario() -> tuple[list[float], list[float], TokenStamps]:
        gpu = VirtualGpu()
        turns = gpu.engine(PRESET, scheduler="turns", max_num_batched_tokens=BUDGET)
        shared = gpu.engine(PRESET, max_num_batched_tokens=BUDGET)
        mine = [gpu.submit(turns, 32, 60) for _ in range(DECODERS)]
        theirs = [gpu.submit(shared, 32, 90) for _ in range(DECODERS)]  # they outlast mine
        await asyncio.sleep(0.05)  # both batches decoding
        long = gpu.submit(turns, PROMPT, 1)
        assert all(await asyncio.gather(*(s.done for s in [*mine, *theirs, long])))
        await gpu.stop()
        return mine[0].tokens, theirs[0].tokens, long

    mine, theirs, long = run_on_virtual_clock(scenario())
    assert set(mine) <= set(theirs)  # every device step ends with a token of the neighbour
    assert long.tokens[0] in theirs
    ticks = [t for t in theirs if mine[0] < t <= long.tokens[0]]  # device steps, both decoding
    kinds = ["decode" if t in mine else "prefill" for t in ticks]
    first = kinds.index("prefill")
    assert first > 0 and set(kinds[:first]) == {"decode"}
    assert kinds[first:] == ["prefill", "decode"] * 3 + ["prefill"]
    assert long.arrival + PRESET.api_overhead <= ticks[first - 1]  # it waited for its turn


FLEET = {
    "format": "narwhal.fleet",
    "format_version": 1,
    "profiles": {"path": "p.json"},
    "engines": [
        {"iid": "e", "url": "http://127.0.0.1:9001", "role": "mixed"},
        {"iid": "f", "url": "http://127.0.0.1:9002", "role": "mixed"},
    ],
}


def _fleet() -> FleetConfig:
    return FleetConfig.model_validate(FLEET)


def test_scheduler_setting_resolves() -> None:
    """``scheduler`` defaults to shared, is set in defaults or per engine (engine wins)."""
    assert [s.scheduler for s in resolve_engines(_fleet(), None)] == ["shared", "shared"]
    sim = sim_config({"scheduler": "turns"}, f={"scheduler": "shared"})
    assert [s.scheduler for s in resolve_engines(_fleet(), sim)] == ["turns", "shared"]


@pytest.mark.parametrize("value", ["alternate", "Turns", "", 1, True, None, ["turns"]])
def test_bad_scheduler_refused(value: object) -> None:
    """A bad ``scheduler`` is one error naming the key, the engine, the choices and the value."""
    sim = sim_config(f={"scheduler": value})
    with pytest.raises(SimConfigError) as info:
        resolve_engines(_fleet(), sim)
    assert str(info.value) == (
        f"sim config engines.f.scheduler: expected shared or turns, got {value!r}"
    )


def test_bad_scheduler_refused_by_the_scheduler_and_the_command(tmp_path: Path) -> None:
    """The scheduler refuses an unknown mode itself; ``narwhal-sim up`` exits 2 with one line."""
    with pytest.raises(ValueError, match="expected shared or turns, got 'both'"):
        EngineScheduler(
            preset=PRESET,
            max_num_seqs=1,
            max_num_batched_tokens=BUDGET,
            kv_cache_tokens=1024,
            block_size=16,
            observer=StepObserver(print, print, print),
            mode="both",  # type: ignore[arg-type]
        )
    fleet = tmp_path / "fleet.json"
    fleet.write_text(json.dumps(FLEET))
    sim = tmp_path / "sim.json"
    sim.write_text(json.dumps(sim_config({"scheduler": "both"})))
    result = CliRunner().invoke(app, ["up", "--fleet", str(fleet), "--sim-config", str(sim)])
    assert result.exit_code == 2
    assert "sim config engines.e.scheduler: expected shared or turns, got 'both'" in result.output


async def test_served_engine_runs_in_turns(tmp_path: Path) -> None:
    """A served engine takes its sim config's ``scheduler``: GET /_sim/state reports it, streams
    complete, and the metrics count every token once (first token + inter-token gaps)."""
    cfg = sim_config({"preset": "tiny", "max_num_batched_tokens": 64}, e0={"scheduler": "turns"})
    engines = [{"iid": "e0", "model": "m"}, {"iid": "e1", "model": "m"}]
    with start_sim_fleet(tmp_path, engines, sim_config=cfg, time_scale=5.0) as fleet:
        assert [fleet.state(i)["scheduler"] for i in ("e0", "e1")] == ["turns", "shared"]
        body = completion_body(model="m", prompt=list(range(500, 700)), max_tokens=12)
        async with EngineClient(fleet.urls["e0"]) as client:
            records = await asyncio.gather(
                *(client.stream_completion(body, request_id=f"t{i}") for i in range(3))
            )
            metrics = await client.metrics()
    assert all(r.ok and r.completion_tokens == 12 for r in records)
    assert metrics.value("vllm:generation_tokens_total") == 36
    assert metrics.value("vllm:time_to_first_token_seconds_count") == 3
    assert metrics.value("vllm:inter_token_latency_seconds_count") == 33
