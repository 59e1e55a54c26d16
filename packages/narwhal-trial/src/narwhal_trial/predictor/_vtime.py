"""The predictor's virtual-time fleet: the router policy, queued prefill, batched decode.

Everything runs on a virtual clock from the profiles' fits; nothing is contacted. The offers:
the runbook's at ``k / rate``, all of one shape; a scheduled workload's at its own offsets divided
by the speedup, each request with its own lengths (its own prefill, its TPOT over its own output
tokens). Per engine:

- The prefill fit ``ttft(L) = a + b·L + c·L²`` and the decode fit
  ``tpot(n, ctx) = d0 + d1·n + d2·n·ctx`` split into what occupies the GPU and what does not: a
  request waits ``a - d0`` off the GPU (HTTP, tokenisation) before it can join a step; a step
  costs ``d0`` plus ``d1·n + d2·Σctx`` for its ``n`` decoding sequences plus, per prefill chunk of
  ``k`` tokens after ``p`` computed ones, ``b·k + c·((p + k)² - p²)``. So an idle engine's TTFT is
  the fit's ``a + b·L + c·L²`` and ``n`` streams decode at the fit's ``tpot(n, ctx)``.
- Continuous batching as vLLM's scheduler: admission first-come-first-served while fewer than
  ``max_num_seqs`` (the limits file or the profile; unbounded without either) run; each step one
  decode token for every sequence past its prefill, then prefill chunks of the others within the
  engine's ``max_num_batched_tokens`` (decode tokens use the budget first); with chunked prefill
  off, whole prompts only (at least one per step).
- How a step mixes them (docs/design.md §13): a step that holds decode tokens and prefill chunks
  costs the decode part plus ``share`` times the chunks' cost plus ``step_s``, the engine's
  measured mixing fit (``mixing-share-step-v1``); without one, ``share`` 1 and ``step_s`` 0:
  vLLM's chunked prefill, one shared step, the chunks' whole cost on the decodes.
- Engines that share a GPU group run on one device whose step costs add (time slicing), unless
  their profile was measured ``--colocated``: such fits already hold the neighbours' slowdown, so
  the engine gets a device of its own.
- The router policy of ``narwhal-sim`` (its README, "Router"): the serving engine is the
  ``mixed``/``decode`` engine with the fewest resident requests (ties: fleet order); a ``decode``
  serving engine in a fleet with ``prefill`` engines splits the request: the least-resident prefill
  engine prefills it (one output token), the KV moves in ``kv_transfer_s_per_token`` per prompt
  token, and the decode engine computes the last prompt token only, then streams.
- The trial client's ``--max-in-flight``: an offer due while that many requests are in flight is
  a schedule miss, never sent (and never good).
- With a ``Replica`` (``_spread``, the Monte Carlo), the fits take the profile's own levels and
  noise: a request's off-GPU wait and prefill chunks cost the nearest profiled length's level
  times the fit's, and its wait gains its drawn TTFT noise; every step's decode cost is the
  nearest profiled point's level times the fit's; a request's TPOT gains its drawn TPOT noise.
  Without one, the model is the fits' alone (deterministic).

Steps that only decode are fused (``fuse``): while an engine alone on its device decodes the same
sequences and nothing can join them (no arrival, no waiting request ready), its steps run in one
tight loop until one of its sequences ends or the next arrival, each step's cost computed exactly
as one step at a time would (the same floats, in the same order). A split fleet's prefill engine
may hand a request over meanwhile: the block is then cut at the first step that ends once the
request is ready, where one step at a time would have admitted it. Only a request's first and
last token times are kept, so nothing observable changes, and long outputs no longer cost one
event per token.
"""

from __future__ import annotations

import bisect
from collections import deque
from dataclasses import dataclass, field

from narwhal_trial.predictor._spread import EngineReplica, Replica
from narwhal_trial.predictor._trial_shape import TrialShape as TrialShape  # also imported from here

DEFAULT_MAX_NUM_BATCHED_TOKENS = 8192  # vLLM's per-step token budget when none is given


@dataclass(frozen=True, slots=True)
class EngineModel:
    """One engine as the predictor sees it (fits in seconds)."""

    iid: str
    role: str
    device: str
    a: float
    b: float
    c: float
    d0: float
    d1: float
    d2: float
    max_num_seqs: int | None = None
    budget: int = DEFAULT_MAX_NUM_BATCHED_TOKENS  # max_num_batched_tokens
    chunked: bool = True  # chunked prefill (off: whole prompts)
    share: float = 1.0  # of the prefill chunks' cost that lands on the step's decodes
    step_s: float = 0.0  # added to a step that holds both decodes and prefill chunks


@dataclass(slots=True, eq=False)
class _Seq:
    """One sequence on one engine (a split request has two)."""

    req: int
    prompt: int
    target: int  # tokens this engine generates
    ready: float
    computed: int = 0
    generated: int = 0
    first: float = -1.0
    last: float = -1.0
    factor: float = 1.0  # the prefill level of this request's length (1: the fit's)


@dataclass(slots=True)
class _Engine:
    model: EngineModel
    delay: float
    spread: EngineReplica | None = None
    waiting: deque[_Seq] = field(default_factory=deque)
    running: list[_Seq] = field(default_factory=list)
    resident: int = 0
    max_decoding: int = 0


@dataclass(slots=True)
class _Device:
    engines: list[_Engine]
    end: float | None = None
    ends: list[float] = field(default_factory=list)  # a fused block's step ends, in order
    plan: list[tuple[_Engine, list[_Seq], list[tuple[_Seq, int]]]] = field(default_factory=list)

    @property
    def steps(self) -> int:
        """The decode steps the plan stands for (fused: more than one)."""
        return max(1, len(self.ends))


@dataclass(frozen=True, slots=True)
class SimulatedOutcome:
    """Client-side times (seconds) of the requests sent, the offers the client's in-flight cap
    kept back (never sent, never good), what each engine saw, and which requests the times are
    (``sent[i]`` is the request of ``ttft[i]`` and ``tpot[i]``)."""

    ttft: list[float]
    tpot: list[float]
    schedule_misses: int
    served_by: dict[str, int]
    prefilled_by: dict[str, int]
    max_decoding: dict[str, int]
    sent: list[int] = field(default_factory=list)


def simulate(
    engines: list[EngineModel],
    shape: TrialShape,
    rate: float,
    replica: Replica | None = None,
    *,
    fuse: bool = True,
) -> SimulatedOutcome:
    """Offer ``shape.requests`` requests at ``n / rate`` to an idle fleet (a scheduled shape's:
    at its offsets divided by ``rate``, the speedup, each with its own lengths); run until all
    end. ``replica``: one Monte Carlo replication's spread (None: the fits alone). ``fuse``:
    decode-only steps in one loop (False: one event per step, the reference it equals)."""
    run = _Run(engines, shape, rate, replica, fuse)
    while run.ended + run.missed < shape.requests:
        now = run.next_event()
        run.end_steps(now)
        while run.offered < shape.requests and run.arrival[run.offered] <= now:
            run.offer()
        run.start_steps(now)
    return run.outcome()


class _Run:
    """One virtual trial: the fleet's engines and devices, the client's offers, and when each
    request's first and last token reached the client."""

    def __init__(
        self,
        engines: list[EngineModel],
        shape: TrialShape,
        rate: float,
        replica: Replica | None,
        fuse: bool,
    ) -> None:
        spreads = {} if replica is None else replica.engines
        self.engines = [_Engine(m, max(0.0, m.a - m.d0), spreads.get(m.iid)) for m in engines]
        self.devices: dict[str, _Device] = {}
        for e in self.engines:
            self.devices.setdefault(e.model.device, _Device([])).engines.append(e)
        self.serving = [e for e in self.engines if e.model.role in ("mixed", "decode")]
        self.serving = self.serving or self.engines
        self.prefillers = [e for e in self.engines if e.model.role == "prefill"]
        self.shape, self.replica = shape, replica
        self.arrival = shape.arrivals(rate)
        self.ins, self.outs = shape.input_lengths(), shape.output_lengths()
        self.first = [0.0] * shape.requests
        self.last = [0.0] * shape.requests
        self.route: list[tuple[_Engine, _Engine | None] | None] = []
        self.served = {e.model.iid: 0 for e in self.engines}
        self.prefilled = {e.model.iid: 0 for e in self.engines}
        self.offered = self.missed = self.ended = 0
        self.fuse = fuse

    def next_event(self) -> float:
        """The next arrival, step end, or idle device's first ready request."""
        now = self.arrival[self.offered] if self.offered < self.shape.requests else float("inf")
        for dev in self.devices.values():
            due = dev.end if dev.end is not None else _next_ready(dev)
            if due is not None and due < now:
                now = due
        return now

    def end_steps(self, now: float) -> None:
        """Emit the tokens of every step that ends by ``now``."""
        for dev in self.devices.values():
            if dev.end is not None and dev.end <= now:
                self.ended += _commit(
                    dev,
                    dev.end,
                    self.shape,
                    self.outs,
                    self.first,
                    self.last,
                    self.route,
                    self.devices,
                )
                dev.end = None

    def offer(self) -> None:
        """The next offer: the client sends it (or its in-flight cap keeps it back), then the
        router places it, split across a prefill and a decode engine where the fleet has both."""
        k = self.offered
        self.offered += 1
        cap = self.shape.max_in_flight
        if cap is not None and k - self.missed - self.ended >= cap:
            self.route.append(None)
            self.missed += 1
            return
        target = min(self.serving, key=lambda e: e.resident)
        prefiller = (
            min(self.prefillers, key=lambda e: e.resident)
            if self.prefillers and target.model.role == "decode"
            else None
        )
        target.resident += 1
        self.served[target.model.iid] += 1
        self.route.append((target, prefiller))
        host = target if prefiller is None else prefiller
        level, wait = 1.0, host.delay
        if host.spread is not None and self.replica is not None:
            level = host.spread.prefill_level(self.ins[k])
            wait = max(0.0, wait * level + host.spread.ttft_noise(self.replica.draws(k)[0]))
        tokens = self.outs[k]
        if prefiller is not None:
            prefiller.resident += 1
            self.prefilled[prefiller.model.iid] += 1
            tokens = 1  # the prefill half makes the first token; the decode engine the rest
        seq = _Seq(k, self.ins[k], tokens, self.arrival[k] + wait)
        seq.factor = level
        _enqueue(host.waiting, seq)

    def start_steps(self, now: float) -> None:
        """Every idle device starts a step when work is ready."""
        arrival = self.arrival[self.offered] if self.offered < self.shape.requests else None
        for dev in self.devices.values():
            if dev.end is None:
                _plan(dev, now)
                if self.fuse and dev.plan and len(dev.engines) == 1:
                    _fuse(dev, float("inf") if arrival is None else arrival)

    def outcome(self) -> SimulatedOutcome:
        """The client's view of the requests sent, and what each engine saw."""
        outs, replica = self.outs, self.replica
        sent = [k for k in range(self.shape.requests) if self.route[k] is not None]
        ttft = [self.first[k] - self.arrival[k] for k in sent]
        tpot = [
            (self.last[k] - self.first[k]) / (outs[k] - 1) if outs[k] > 1 else 0.0 for k in sent
        ]
        if replica is not None:
            for i, k in enumerate(sent):
                routed = self.route[k]
                assert routed is not None
                spread = routed[0].spread
                if spread is not None and outs[k] > 1:
                    tpot[i] = max(0.0, tpot[i] + spread.tpot_noise(replica.draws(k)[1]))
        decoding = {e.model.iid: e.max_decoding for e in self.engines}
        return SimulatedOutcome(
            ttft, tpot, self.missed, self.served, self.prefilled, decoding, sent
        )


def _enqueue(waiting: deque[_Seq], seq: _Seq) -> None:
    """Queue ``seq`` behind every request ready no later than it (a request whose off-GPU wait
    drew a longer noise does not hold back the ones that arrived after it and are ready first)."""
    k = len(waiting)
    while k > 0 and waiting[k - 1].ready > seq.ready:
        k -= 1
    waiting.insert(k, seq)


def _next_ready(dev: _Device) -> float | None:
    ready = [e.waiting[0].ready for e in dev.engines if e.waiting]
    return min(ready) if ready else None


def _plan(dev: _Device, now: float) -> None:
    plan = []
    cost = 0.0
    for e in dev.engines:
        m = e.model
        limit = m.max_num_seqs
        while e.waiting and e.waiting[0].ready <= now and (limit is None or len(e.running) < limit):
            e.running.append(e.waiting.popleft())
        if not e.running:
            continue
        decode = [s for s in e.running if s.computed >= s.prompt]
        sum_ctx = sum(s.prompt + s.generated for s in decode)
        step = m.d0 + m.d1 * len(decode) + m.d2 * sum_ctx
        if e.spread is not None and decode:
            step *= e.spread.decode_level(len(decode), sum_ctx / len(decode))
        e.max_decoding = max(e.max_decoding, len(decode))
        budget = m.budget - len(decode)
        chunks: list[tuple[_Seq, int]] = []
        prefill = 0.0
        for s in e.running:
            if budget <= 0:
                break
            left = s.prompt - s.computed
            if left <= 0:
                continue
            if m.chunked:
                take = min(left, budget)
            elif chunks and left > budget:
                break
            else:
                take = left  # chunked prefill off: the whole prompt, even beyond the budget
            p = s.computed
            prefill += (m.b * take + m.c * ((p + take) ** 2 - p * p)) * s.factor
            chunks.append((s, take))
            budget -= take
        if chunks and decode:
            prefill = m.share * prefill + m.step_s
        cost += step + prefill
        plan.append((e, decode, chunks))
    if plan:
        dev.plan = plan
        dev.end = now + cost


def _fuse(dev: _Device, horizon: float) -> None:
    """Extend a planned decode-only step of the device's one engine by the steps that follow it
    unchanged: each next step starts before ``horizon`` (the next arrival) and before the first
    waiting request is ready (unless the engine is full), and none of its sequences ended. A
    handoff later may cut the block (``_cut``)."""
    ((e, decode, chunks),) = dev.plan
    if chunks or not decode or dev.end is None:
        return
    m = e.model
    if e.waiting and (m.max_num_seqs is None or len(e.running) < m.max_num_seqs):
        horizon = min(horizon, e.waiting[0].ready)
    n = len(decode)
    left = min(s.target - s.generated for s in decode)
    sum_ctx = sum(s.prompt + s.generated for s in decode)
    end = dev.end
    ends = [end]
    while len(ends) < left and end < horizon:
        sum_ctx += n
        step = m.d0 + m.d1 * n + m.d2 * sum_ctx
        if e.spread is not None:
            step *= e.spread.decode_level(n, sum_ctx / n)
        end = end + step
        ends.append(end)
    if len(ends) > 1:
        dev.end, dev.ends = end, ends


def _cut(dev: _Device, ready: float) -> None:
    """A request ready at ``ready`` joins the device's engine: a fused block ends with its first
    step that ends at ``ready`` or later (the step one step at a time would admit it after)."""
    j = bisect.bisect_left(dev.ends, ready)
    if j < len(dev.ends) - 1:
        dev.end = dev.ends[j]
        del dev.ends[j + 1 :]


def _commit(
    dev: _Device,
    now: float,
    shape: TrialShape,
    outs: list[int],
    first: list[float],
    last: list[float],
    route: list[tuple[_Engine, _Engine | None] | None],
    devices: dict[str, _Device],
) -> int:
    """Emit the step's tokens; returns how many requests ended (last token at the client)."""
    ended, steps = 0, dev.steps
    for e, decode, chunks in dev.plan:
        done: list[_Seq] = []
        for s in decode:
            s.generated += steps
            s.last = now
            if s.generated >= s.target:
                done.append(s)
        for s, take in chunks:
            s.computed += take
            if s.computed >= s.prompt:
                s.generated = 1
                s.first = s.last = now
                if s.target <= 1:
                    done.append(s)
        for s in done:
            e.running.remove(s)
            e.resident -= 1
            routed = route[s.req]
            assert routed is not None  # only sent requests have sequences
            target, pre = routed
            if pre is e:  # the prefill half: hand the KV to the decode engine
                ready = now + shape.kv_transfer_s_per_token * s.prompt + target.delay
                seq = _Seq(s.req, s.prompt, outs[s.req], ready, computed=s.prompt - 1)
                target.waiting.append(seq)
                _cut(devices[target.model.device], ready)
                continue
            first[s.req] = s.first
            last[s.req] = s.last
            ended += 1
    dev.plan = []
    dev.ends = []
    return ended
