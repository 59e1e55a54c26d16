"""The freshness probe (``--verify STORE --out PROBE``, docs/design.md §18): how fast each engine
runs now against its profile.

Per selected engine, the profile for its current key (fleet engine, GPU group, role split, target
role) is looked up in STORE; an engine without one is refused before any engine is contacted.
Every engine is then preflighted as a live sweep preflights it (at its profile's own sweep
settings), and measured one at a time with the sweep's own functions: evidence and health
before, one warm-up, a few of the profile's prefill lengths and decode cohorts
(``results._probe``), evidence and health after. The document is written once every engine is
measured, atomically, to a destination that must not exist; nothing is written on a failure.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import orjson

from narwhal_engine_client import gc_paused
from narwhal_profile_cli._errors import ProfileAbortError, ProfileError, ProfileUsageError
from narwhal_profile_cli._live import (
    connections_for,
    engine_clients,
    evidence_after,
    evidence_before,
    explain_by_restart,
    select_engines,
)
from narwhal_profile_cli._options import SweepOptions
from narwhal_profile_cli._progress import Progress, sweep_weight
from narwhal_profile_cli.results._assemble import generator
from narwhal_profile_cli.results._probe import (
    DECODE_REPEATS,
    PREFILL_REPEATS,
    ProbePlan,
    check_references,
    engine_drift,
    left_out_line,
    probe_plan,
)
from narwhal_profile_cli.results._writer import LiveState
from narwhal_profile_cli.sweeps._decode import run_decode
from narwhal_profile_cli.sweeps._prefill import run_prefill, warm_up
from narwhal_profile_cli.sweeps._preflight import EnginePlan, preflight
from narwhal_profile_cli.sweeps._prompts import PromptFactory
from narwhal_profile_cli.sweeps._requests import RequestIds
from narwhal_store import (
    EngineDrift,
    EngineEntry,
    LimitsFile,
    LoadedFleet,
    LoadedStore,
    PathAccessError,
    ProbeDocument,
    Profile,
    ProfileSamples,
    StoreError,
    creation_problem,
    lstat_or_none,
    profile_key,
    write_file_atomic,
)


@dataclass(frozen=True, slots=True)
class ProbeTarget:
    """One engine to probe: its fleet entry, its accepted profile with that profile's samples,
    the points to measure, and when the profile was measured (its store's ``created_at``: for a
    refit or a merge, when that store was written)."""

    entry: EngineEntry
    profile: Profile
    samples: ProfileSamples
    plan: ProbePlan
    created_at: str


def probe_targets(fleet: LoadedFleet, store: LoadedStore, only: Sequence[str]) -> list[ProbeTarget]:
    """The selected engines with the profile of their current key in ``store``; an engine
    without one, or whose profile cannot be probed, is a usage error naming it and the store."""
    targets = []
    for entry in select_engines(fleet, only):
        iid = entry.iid
        key = profile_key(fleet, iid)
        found = [p for p in store.store.find(iid) if p.key.ident() == key.ident()]
        if not found:
            others = [p.key.label() for p in store.store.find(iid)]
            held = f" (it holds {'; '.join(others)})" if others else ""
            raise ProfileUsageError(
                f"engine {iid}: the store {store.path} holds no profile for its current key "
                f"{key.label()}{held}; profile it first",
                engine=iid,
                code="no_profile",
            )
        profile = found[0]
        samples = store.samples(profile.key)  # read_store verified one entry per profile
        plan = probe_plan(iid, samples.settings)
        check_references(iid, profile, samples, plan, str(store.path))
        targets.append(ProbeTarget(entry, profile, samples, plan, store.store.created_at))
    return targets


def check_fresh_file(out: Path) -> None:
    """Refuse an ``--out`` that exists (of any kind, a symlink included), whose folder is missing
    or cannot take a new file."""
    try:
        if lstat_or_none(out) is not None:
            raise ProfileUsageError(
                f"--out {out} already exists; a probe needs a fresh destination",
                code="destination",
            )
        folder = lstat_or_none(out.parent)
        problem = (
            f"its folder {out.parent} does not exist" if folder is None else creation_problem(out)
        )
    except PathAccessError as exc:
        raise ProfileUsageError(f"--out {out}: {exc}", code="destination") from exc
    if problem is not None:
        raise ProfileUsageError(f"--out {out}: {problem}", code="destination")


def write_probe(out: Path, doc: ProbeDocument) -> None:
    """Write ``doc`` atomically to ``out``, still refusing one that appeared meanwhile."""
    check_fresh_file(out)
    data = orjson.dumps(doc.model_dump(mode="json"), option=orjson.OPT_INDENT_2) + b"\n"
    try:
        write_file_atomic(out, data, mode=0o644)
    except StoreError as exc:
        raise ProfileError(f"--out {out}: {exc}", code="write_failed") from exc


def probe_document(
    fleet: LoadedFleet,
    store: LoadedStore,
    store_arg: Path,
    threshold: float,
    engines: dict[str, EngineDrift],
) -> ProbeDocument:
    """The ``narwhal.probe`` document of one probe of ``engines`` against ``store``."""
    return ProbeDocument(
        format="narwhal.probe",
        format_version=1,
        generator=generator(),
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        fleet=str(fleet.path),
        fleet_sha256=fleet.sha256,
        profiles=str(store_arg),
        profiles_sha256=store.sha256,
        threshold=threshold,
        engines=engines,
    )


def _sweep_of(target: ProbeTarget) -> SweepOptions:
    """The profile's own sweep, as the preflight checks it (its points and minimums)."""
    settings = target.samples.settings
    return SweepOptions(
        prefill_lens=tuple(settings.prefill_lens),
        decode_input_lens=tuple(settings.decode_input_lens),
        decode_concurrency=tuple(settings.decode_concurrency),
        decode_tokens=settings.decode_tokens,
        prefill_repeats=settings.prefill_repeats,
        decode_repeats=settings.decode_repeats,
    )


def _work(plan: ProbePlan) -> float:
    return sweep_weight(
        plan.prefill_lens,
        (plan.decode_input_len,),
        plan.concurrencies,
        PREFILL_REPEATS,
        DECODE_REPEATS,
        plan.decode_tokens,
    )


async def run_verify(
    targets: Sequence[ProbeTarget],
    *,
    threshold: float,
    limits: LimitsFile | None,
    progress: Progress,
    state: LiveState,
    keepalive_expiry_s: float | None = None,
    clock_ns: Callable[[], int] = time.perf_counter_ns,
    warn: Callable[[str], None] = lambda message: None,
    limits_path: Path | None = None,
) -> dict[str, EngineDrift]:
    """Preflight every target, then probe them one at a time; each engine's drift by iid.

    ``warn`` receives one line per engine whose probe cohorts were left out (invalid by the
    sweep's rules: their figures are not in the document)."""
    sweeps = {t.entry.iid: _sweep_of(t) for t in targets}
    connections = max(connections_for(s) for s in sweeps.values())
    entries = [t.entry for t in targets]
    async with engine_clients(entries, clock_ns, connections, keepalive_expiry_s) as clients:
        plans: dict[str, EnginePlan] = {}
        for target in targets:
            iid = target.entry.iid
            given = None if limits is None else limits.engines.get(iid)
            progress.update(iid, "preflight", "health, max_model_len, evidence, scheduler")
            plans[iid] = await preflight(
                target.entry, clients[iid], sweeps[iid], given, limits_path
            )
            progress.finish(iid)
        for target in targets:
            progress.add_work(_work(target.plan))
        ids = RequestIds(secrets.token_hex(4))
        drifts: dict[str, EngineDrift] = {}
        with gc_paused():  # as in the sweep: no full collection stalls a measurement
            for target in targets:
                iid = target.entry.iid
                drifts[iid] = await _probe(
                    plans[iid], target, ids, progress, clock_ns, threshold, warn
                )
                if state.interrupted:  # Ctrl-C whose cancellation a library swallowed: stop
                    raise asyncio.CancelledError
                progress.finish(iid)
    return drifts


async def _probe(
    plan: EnginePlan,
    target: ProbeTarget,
    ids: RequestIds,
    progress: Progress,
    clock_ns: Callable[[], int],
    threshold: float,
    warn: Callable[[str], None],
) -> EngineDrift:
    """One engine's probe between two evidence reads (and health checks), then its drift."""
    probe, points = plan.probe, target.plan
    iid = probe.iid
    started = time.monotonic()
    before = await evidence_before(plan)
    prompts = PromptFactory(probe.pool, secrets.randbits(63))
    try:
        progress.update(iid, "warm-up", f"L={points.prefill_lens[0]}")
        await warm_up(probe, prompts, ids, points.prefill_lens[0])
        prefill = await run_prefill(
            probe, points.prefill_lens, PREFILL_REPEATS, prompts, ids, progress
        )
        cohorts = await run_decode(
            probe,
            (points.decode_input_len,),
            points.concurrencies,
            DECODE_REPEATS,
            points.decode_tokens,
            prompts,
            ids,
            progress,
            clock_ns,
        )
    except ProfileAbortError as exc:
        if exc.engine == iid:
            await explain_by_restart(plan, before, exc)
        raise
    await evidence_after(plan, before)
    seconds = time.monotonic() - started
    line = left_out_line(iid, cohorts)
    if line is not None:
        warn(line)
    return engine_drift(
        iid,
        target.profile,
        target.samples,
        created_at=target.created_at,
        prefill=prefill,
        cohorts=cohorts,
        threshold=threshold,
        seconds=seconds,
    )
