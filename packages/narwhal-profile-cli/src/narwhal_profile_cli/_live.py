"""The live sweep (docs/design.md §4, §6, §7): select, preflight all, then measure and write each
engine.

Engines are measured group by group (``sweeps._parallel``: up to ``--parallel-groups`` GPU
groups at once, one engine per group at a time); ``results._writer`` rewrites the store after each
engine, so an abort or an interrupt keeps every finished profile.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from narwhal_engine_client import EngineClient, EngineClientError, gc_paused
from narwhal_fit import DecodeFit, PrefillFit
from narwhal_profile_cli._errors import ProfileAbortError, ProfileError, ProfileUsageError
from narwhal_profile_cli._options import ScaleOut, SweepOptions
from narwhal_profile_cli._progress import Progress, sweep_weight
from narwhal_profile_cli.results._assemble import EngineMeasurement
from narwhal_profile_cli.results._writer import LiveState, StoreWriter
from narwhal_profile_cli.sweeps._colocation import ColocationPlan, neighbour_load, plan_colocation
from narwhal_profile_cli.sweeps._decode import Chores, Cohort, fit_cohorts, run_decode
from narwhal_profile_cli.sweeps._evidence import check_unchanged, read_evidence
from narwhal_profile_cli.sweeps._groups import GroupUnit, group_units, shard_store_path, shard_units
from narwhal_profile_cli.sweeps._mixing import run_mixing
from narwhal_profile_cli.sweeps._mixing_plan import MixingResult, mixing_work
from narwhal_profile_cli.sweeps._neighbours import NeighbourSettings
from narwhal_profile_cli.sweeps._parallel import run_groups
from narwhal_profile_cli.sweeps._prefill import (
    PrefillTimings,
    fit_and_gate,
    ramp_estimate,
    run_prefill,
    warm_up,
)
from narwhal_profile_cli.sweeps._preflight import EnginePlan, check_health, preflight
from narwhal_profile_cli.sweeps._prompts import PromptFactory
from narwhal_profile_cli.sweeps._requests import RequestIds
from narwhal_store import (
    EngineEntry,
    LimitsFile,
    LoadedFleet,
    NeighbourRecord,
    StoreError,
    check_destination,
)


def select_engines(fleet: LoadedFleet, only: Sequence[str]) -> list[EngineEntry]:
    """The engines to measure, in fleet order; any ``--only`` value matching none aborts."""
    engines = list(fleet.config.engines)
    if not only:
        return engines
    known = [e.iid for e in engines]
    unmatched = [iid for iid in only if iid not in known]
    if unmatched:
        shown = ", ".join(repr(i) for i in unmatched)
        what = (
            f"the --only selection matches zero configured engines: {shown}"
            if len(unmatched) == len(only)
            else f"--only {shown} matches no configured engine"
        )
        raise ProfileAbortError(f"{what} (configured: {', '.join(known)})", code="no_engines")
    return [e for e in engines if e.iid in set(only)]


@contextlib.asynccontextmanager
async def engine_clients(
    entries: Sequence[EngineEntry],
    clock_ns: Callable[[], int],
    connections: int,
    keepalive_expiry_s: float | None,
) -> AsyncIterator[dict[str, EngineClient]]:
    """One engine client per entry, by iid (also the freshness probe's)."""
    expiry = {} if keepalive_expiry_s is None else {"keepalive_expiry_s": keepalive_expiry_s}
    async with contextlib.AsyncExitStack() as stack:
        clients: dict[str, EngineClient] = {}
        for entry in entries:
            try:
                client = EngineClient.from_env(
                    entry.url,
                    entry.api_key_env,
                    clock_ns=clock_ns,
                    max_connections=connections,
                    # the raw HTTP/1.1 transport: a third of httpx's CPU per chunk, connections kept
                    stream_transport="raw" if entry.url.startswith("http://") else "httpx",
                    **expiry,
                )
            except EngineClientError as exc:
                raise ProfileUsageError(f"engine {entry.iid}: {exc}", engine=entry.iid) from exc
            clients[entry.iid] = await stack.enter_async_context(client)
        yield clients


async def run_live(
    fleet: LoadedFleet,
    *,
    only: Sequence[str],
    limits: LimitsFile | None,
    sweep: SweepOptions,
    colocation: NeighbourSettings | None,
    overwrite: bool,
    progress: Progress,
    state: LiveState,
    scale: ScaleOut | None = None,
    keepalive_expiry_s: float | None = None,
    clock_ns: Callable[[], int] = time.perf_counter_ns,
    warn: Callable[[str], None] = lambda message: None,
    limits_path: Path | None = None,
) -> None:
    """Measure the selected engines of ``fleet`` into its ``profiles.path``.

    ``limits`` (read from ``limits_path``, which messages name) caps each engine's concurrencies
    (``max_num_seqs``) and gives the scheduler settings the engine does not show (§13).

    With ``scale``, engines of up to ``parallel_groups`` GPU groups are measured at once (one
    engine per group at a time), and ``shard`` picks this process's share of the groups, written
    to :func:`shard_store_path`. ``warn`` receives one line per engine whose decode points were
    left out of its fit, and the decode-fit and bursty-delivery warnings of ``results._quality``.
    """
    scale = scale or ScaleOut()
    units = group_units(select_engines(fleet, only))
    if scale.shard is not None:
        units = shard_units(units, scale.shard)
    selected = [entry for unit in units for entry in unit.engines]
    store_path = shard_store_path(fleet.profiles_path, scale.shard)
    state.path = store_path
    state.order = {e.iid: i for i, e in enumerate(fleet.config.engines)}
    try:
        check_destination(store_path, mode="replace" if overwrite else "fresh")
    except StoreError as exc:
        raise ProfileUsageError(f"{exc}", code="destination") from exc
    needed = list(fleet.config.engines) if colocation is not None else selected
    connections = connections_for(sweep)
    async with engine_clients(needed, clock_ns, connections, keepalive_expiry_s) as clients:
        plans: dict[str, EnginePlan] = {}
        for entry in selected:
            given = None if limits is None else limits.engines.get(entry.iid)
            progress.update(entry.iid, "preflight", "health, max_model_len, evidence, scheduler")
            plans[entry.iid] = await preflight(entry, clients[entry.iid], sweep, given, limits_path)
            progress.finish(entry.iid)
        colocations: dict[str, ColocationPlan] = {}
        if colocation is not None:
            colocations = await plan_colocation(fleet, selected, clients, colocation)
        for plan in plans.values():
            progress.add_work(_work(plan, sweep))
        ids = RequestIds(secrets.token_hex(4))
        alone = (scale.parallel_groups or 1) == 1 or len(units) == 1
        writer = StoreWriter(fleet, store_path, state, overwrite, sweep, scale, colocations)

        async def measure_group(unit: GroupUnit) -> None:
            for entry in unit.engines:
                plan = plans[entry.iid]
                measurement = await _measure(
                    plan,
                    sweep,
                    ids,
                    progress,
                    clock_ns,
                    colocations.get(entry.iid),
                    ramp_chores=alone,
                )
                if state.interrupted:  # Ctrl-C whose cancellation a library swallowed: stop
                    raise asyncio.CancelledError
                for line in await writer.add(measurement):
                    warn(line)
                progress.finish(entry.iid)

        with gc_paused():  # a full collection stalls the loop for 0.1-0.5 s late in a sweep
            await run_groups(
                units,
                measure_group,
                scale.parallel_groups or 1,
                kept=lambda: f"{state.written} finished profile(s) kept in {store_path}",
            )


@dataclass(slots=True)
class _Sweep:
    """What one engine's sweep measured, and the fits already made during it."""

    prefill: list[PrefillTimings]
    cohorts: list[Cohort]
    neighbours: list[NeighbourRecord]
    prefill_fit: PrefillFit | None = None
    decode_fit: DecodeFit | None = None
    mixing: MixingResult | None = None


def connections_for(sweep: SweepOptions) -> int:
    """Connections per engine: every stream of the largest cohort (or mixing point, with its
    prefill) needs its own, plus the metrics polls."""
    streams = max(sweep.decode_concurrency)
    if sweep.mixing is not None:
        streams = max(streams, sweep.mixing.concurrency + 1)
    return max(256, streams + 8)


def _work(plan: EnginePlan, sweep: SweepOptions) -> float:
    """How much of the progress bar one engine's sweep is."""
    points = plan.points
    weight = sweep_weight(
        points.prefill_lens,
        points.decode_input_lens,
        points.decode_concurrency,
        sweep.prefill_repeats,
        sweep.decode_repeats,
        sweep.decode_tokens,
    )
    return weight + (0.0 if sweep.mixing is None else mixing_work(points, sweep.mixing))


async def _measure(
    plan: EnginePlan,
    sweep: SweepOptions,
    ids: RequestIds,
    progress: Progress,
    clock_ns: Callable[[], int],
    colocation: ColocationPlan | None,
    *,
    ramp_chores: bool,
) -> EngineMeasurement:
    """One engine's sweep between two evidence reads (and health checks), then its fits."""
    probe = plan.probe
    iid = probe.iid
    before = await evidence_before(plan)
    seed = secrets.randbits(63)
    try:
        done = await _sweep(
            plan, sweep, ids, progress, clock_ns, colocation, seed, ramp_chores=ramp_chores
        )
    except ProfileAbortError as exc:
        if exc.engine == iid:
            await explain_by_restart(plan, before, exc)
        raise
    after = await evidence_after(plan, before)
    prefill_fit = done.prefill_fit
    if prefill_fit is None:
        prefill_fit = await asyncio.to_thread(fit_and_gate, iid, done.prefill)
    decode_fit = done.decode_fit
    if decode_fit is None:
        decode_fit = await asyncio.to_thread(fit_cohorts, iid, done.cohorts)
    return EngineMeasurement(
        plan=plan,
        sweep_tokens=sweep.decode_tokens,
        prefill_repeats=sweep.prefill_repeats,
        decode_repeats=sweep.decode_repeats,
        prompt_seed=seed,
        before=before,
        after=after,
        prefill=done.prefill,
        prefill_fit=prefill_fit,
        cohorts=done.cohorts,
        decode_fit=decode_fit,
        colocation=None if colocation is None else colocation.settings,
        neighbours=done.neighbours,
        mixing=done.mixing,
    )


async def evidence_before(plan: EnginePlan) -> dict[str, Any]:
    """Health and evidence before the sweep; an engine whose ``max_model_len`` changed since
    preflight aborts."""
    probe = plan.probe
    await check_health(probe.iid, probe.client)
    before = await read_evidence(probe.iid, probe.client, probe.model, plan.contract)
    if before.get("max_model_len") not in (None, probe.max_model_len):
        raise ProfileAbortError(
            f"engine {probe.iid}: max_model_len changed since preflight ({probe.max_model_len} "
            f"-> {before.get('max_model_len')})",
            engine=probe.iid,
            code="generation_changed",
        )
    return before


async def evidence_after(plan: EnginePlan, before: dict[str, Any]) -> dict[str, Any]:
    """Evidence and health after the sweep: the same engine, unchanged, or its samples are
    discarded."""
    probe = plan.probe
    try:
        after = await read_evidence(probe.iid, probe.client, probe.model, plan.contract)
    except ProfileAbortError as exc:
        if exc.code != "contract_mismatch":
            raise
        raise ProfileAbortError(
            f"{exc.message} after its sweep; its samples were discarded",
            engine=probe.iid,
            code=exc.code,
        ) from exc
    check_unchanged(probe.iid, before, after)
    await check_health(probe.iid, probe.client)
    return after


async def _sweep(
    plan: EnginePlan,
    sweep: SweepOptions,
    ids: RequestIds,
    progress: Progress,
    clock_ns: Callable[[], int],
    colocation: ColocationPlan | None,
    seed: int,
    *,
    ramp_chores: bool,
) -> _Sweep:
    """Warm-up, prefill, decode and (``--mixing``) mixing points, with any neighbour load.

    With ``ramp_chores`` (no other group at work), the prefill fit and gate run while the engine
    prefills a long decode cohort, so its first-fit cost (importing scipy) overlaps the engine's
    work; otherwise they run after the sweep in a worker thread. With ``--mixing`` both fits are
    made right after the decode sweep (the mixing points are timed and sized from them), then the
    mixing points run (chunks counted with the engine's ``max_num_batched_tokens`` from
    ``plan.scheduler``).
    """
    probe = plan.probe
    iid = probe.iid
    prompts = PromptFactory(probe.pool, seed)
    points = plan.points
    async with neighbour_load(colocation, seed=seed, clock_ns=clock_ns) as load:
        progress.update(iid, "warm-up", f"L={points.prefill_lens[0]}")
        await warm_up(probe, prompts, ids, points.prefill_lens[0])
        load.mark()
        prefill = await run_prefill(
            probe, points.prefill_lens, sweep.prefill_repeats, prompts, ids, progress
        )
        fits: list[PrefillFit] = []
        chores = None
        if ramp_chores:  # the first fit imports scipy: do it while the engine prefills
            chores = Chores(
                work=lambda: fits.append(fit_and_gate(iid, prefill)),
                ramp_s=ramp_estimate(prefill),
            )
        cohorts = await run_decode(
            probe,
            points.decode_input_lens,
            points.decode_concurrency,
            sweep.decode_repeats,
            sweep.decode_tokens,
            prompts,
            ids,
            progress,
            clock_ns,
            chores,
        )
        done = _Sweep(prefill, cohorts, [], fits[0] if fits else None)
        if sweep.mixing is not None:
            if done.prefill_fit is None:
                done.prefill_fit = await asyncio.to_thread(fit_and_gate, iid, prefill)
            done.decode_fit = await asyncio.to_thread(fit_cohorts, iid, cohorts)
            done.mixing = await run_mixing(
                probe,
                points,
                sweep.mixing,
                prefill=prefill,
                prefill_fit=done.prefill_fit,
                decode_fit=done.decode_fit,
                budget=plan.scheduler.max_num_batched_tokens.value,
                prompts=prompts,
                ids=ids,
                progress=progress,
                clock_ns=clock_ns,
            )
        done.neighbours = load.finish()
    return done


async def explain_by_restart(
    plan: EnginePlan, before: dict[str, Any], failure: ProfileAbortError
) -> None:
    """When a request failed mid-sweep, report a restart (or changed facts) if that is the cause."""
    probe = plan.probe
    try:
        after = await read_evidence(probe.iid, probe.client, probe.model, plan.contract)
    except ProfileError:
        return
    try:
        check_unchanged(probe.iid, before, after)
    except ProfileAbortError as changed:
        raise ProfileAbortError(
            f"{changed.message} (first symptom: {failure.message})",
            engine=probe.iid,
            code=changed.code,
        ) from failure
