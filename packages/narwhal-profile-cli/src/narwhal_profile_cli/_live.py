"""The live sweep (DESIGN §4, §6, §7): select, preflight all, then measure and write each engine.

The store and sidecar are written when the first engine completes and rewritten after each later
one, so an abort or an interrupt keeps every finished profile.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from narwhal_engine_client import EngineClient, EngineClientError
from narwhal_profile_cli._assemble import EngineMeasurement, Measured, assemble, documents
from narwhal_profile_cli._colocation import ColocationPlan, neighbour_load, plan_colocation
from narwhal_profile_cli._decode_sweep import fit_cohorts, run_decode
from narwhal_profile_cli._errors import ProfileAbortError, ProfileError, ProfileUsageError
from narwhal_profile_cli._evidence import check_unchanged, read_evidence
from narwhal_profile_cli._neighbours import NeighbourSettings
from narwhal_profile_cli._options import SweepSettings
from narwhal_profile_cli._prefill_sweep import fit_and_gate, run_prefill, warm_up
from narwhal_profile_cli._preflight import EnginePlan, check_health, preflight
from narwhal_profile_cli._progress import Progress, sweep_weight
from narwhal_profile_cli._prompts import PromptFactory
from narwhal_profile_cli._requests import RequestIds
from narwhal_store import (
    DestinationError,
    EngineEntry,
    LimitsFile,
    LoadedFleet,
    StoreError,
    check_destination,
    write_store,
)


@dataclass(slots=True)
class LiveState:
    """What the sweep has written so far (read after an abort or an interrupt)."""

    written: int = 0
    measured: list[Measured] = field(default_factory=list)
    interrupted: bool = False  # Ctrl-C seen (set by the command's signal handler)


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


def _write_mode(overwrite: bool, written: int) -> Literal["fresh", "replace"]:
    return "replace" if overwrite or written > 0 else "fresh"


@contextlib.asynccontextmanager
async def _clients(
    entries: Sequence[EngineEntry], clock_ns: Callable[[], int], connections: int
) -> AsyncIterator[dict[str, EngineClient]]:
    async with contextlib.AsyncExitStack() as stack:
        clients: dict[str, EngineClient] = {}
        for entry in entries:
            try:
                client = EngineClient.from_env(
                    entry.url, entry.api_key_env, clock_ns=clock_ns, max_connections=connections
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
    sweep: SweepSettings,
    colocation: NeighbourSettings | None,
    overwrite: bool,
    progress: Progress,
    state: LiveState,
    clock_ns: Callable[[], int] = time.perf_counter_ns,
    warn: Callable[[str], None] = lambda message: None,
) -> None:
    """Measure the selected engines of ``fleet`` into its ``profiles.path``.

    ``warn`` receives one line per engine whose decode points were left out of its fit.
    """
    selected = select_engines(fleet, only)
    store_path = fleet.profiles_path
    try:
        check_destination(store_path, mode="replace" if overwrite else "fresh")
    except StoreError as exc:
        raise ProfileUsageError(f"{exc}", code="destination") from exc
    needed = list(fleet.config.engines) if colocation is not None else selected
    # Every stream of the largest cohort needs its own connection (plus metrics polls).
    connections = max(256, max(sweep.decode_concurrency) + 8)
    async with _clients(needed, clock_ns, connections) as clients:
        plans: list[EnginePlan] = []
        for entry in selected:
            limit = None
            if limits is not None and entry.iid in limits.engines:
                limit = limits.engines[entry.iid].max_num_seqs
            progress.update(entry.iid, "preflight", "health, max_model_len, evidence")
            plans.append(await preflight(entry, clients[entry.iid], sweep, limit))
        colocations: dict[str, ColocationPlan] = {}
        if colocation is not None:
            colocations = await plan_colocation(fleet, selected, clients, colocation)
        for plan in plans:
            points = plan.points
            progress.add_work(
                sweep_weight(
                    points.prefill_lens,
                    points.decode_input_lens,
                    points.decode_concurrency,
                    sweep.prefill_repeats,
                    sweep.decode_repeats,
                    sweep.decode_tokens,
                )
            )
        run_id = secrets.token_hex(4)
        ids = RequestIds(run_id)
        for plan in plans:
            measurement = await _measure(
                plan, sweep, ids, progress, clock_ns, colocations.get(plan.entry.iid)
            )
            left_out = [c for c in measurement.cohorts if c.point is None]
            if left_out:
                warn(
                    f"{plan.entry.iid}: {len(left_out)} decode point(s) left out of the fit: "
                    + "; ".join(
                        f"input {c.input_len} x {c.concurrency}: {c.reason}" for c in left_out
                    )
                )
            if state.interrupted:  # Ctrl-C whose cancellation a library swallowed: stop here
                raise asyncio.CancelledError
            state.measured.append(assemble(fleet, measurement))
            store, sidecar = documents(fleet, state.measured)
            try:
                write_store(store_path, store, sidecar, mode=_write_mode(overwrite, state.written))
            except DestinationError as exc:  # e.g. created or replaced by a symlink meanwhile
                raise ProfileUsageError(f"{exc}", code="destination") from exc
            except StoreError as exc:
                raise ProfileError(
                    f"cannot write {store_path}: {exc}", code="write_failed"
                ) from exc
            state.written = len(state.measured)


async def _measure(
    plan: EnginePlan,
    sweep: SweepSettings,
    ids: RequestIds,
    progress: Progress,
    clock_ns: Callable[[], int],
    colocation: ColocationPlan | None,
) -> EngineMeasurement:
    """One engine's sweep between two evidence reads (and health checks)."""
    probe = plan.probe
    iid = probe.iid
    await check_health(iid, probe.client)
    before = await read_evidence(iid, probe.client, probe.model, plan.contract)
    if before.get("max_model_len") not in (None, probe.max_model_len):
        raise ProfileAbortError(
            f"engine {iid}: max_model_len changed since preflight ({probe.max_model_len} -> "
            f"{before.get('max_model_len')})",
            engine=iid,
            code="generation_changed",
        )
    seed = secrets.randbits(63)
    prompts = PromptFactory(probe.pool, seed)
    points = plan.points
    try:
        async with neighbour_load(colocation, seed=seed, clock_ns=clock_ns) as load:
            progress.update(iid, "warm-up", f"L={points.prefill_lens[0]}")
            await warm_up(probe, prompts, ids, points.prefill_lens[0])
            load.mark()
            prefill = await run_prefill(
                probe, points.prefill_lens, sweep.prefill_repeats, prompts, ids, progress
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
            )
            neighbours = load.finish()
    except ProfileAbortError as exc:
        if exc.engine == iid:
            await _explain_by_restart(plan, before, exc)
        raise
    try:
        after = await read_evidence(iid, probe.client, probe.model, plan.contract)
    except ProfileAbortError as exc:
        if exc.code != "contract_mismatch":
            raise
        raise ProfileAbortError(
            f"{exc.message} after its sweep; its samples were discarded",
            engine=iid,
            code=exc.code,
        ) from exc
    check_unchanged(iid, before, after)
    await check_health(iid, probe.client)
    prefill_fit = fit_and_gate(iid, prefill)
    decode_fit = fit_cohorts(iid, cohorts)
    return EngineMeasurement(
        plan=plan,
        sweep_tokens=sweep.decode_tokens,
        prefill_repeats=sweep.prefill_repeats,
        decode_repeats=sweep.decode_repeats,
        prompt_seed=seed,
        before=before,
        after=after,
        prefill=prefill,
        prefill_fit=prefill_fit,
        cohorts=cohorts,
        decode_fit=decode_fit,
        colocation=None if colocation is None else colocation.settings,
        neighbours=neighbours,
    )


async def _explain_by_restart(
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
