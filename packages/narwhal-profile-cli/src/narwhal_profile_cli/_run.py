"""Run the selected mode: load the fleet (and limits), then live sweep, refit, merge or the
freshness probe."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TextIO, TypeVar

from narwhal_profile_cli._errors import ProfileInterrupted, ProfileUsageError
from narwhal_profile_cli._live import run_live
from narwhal_profile_cli._modes import ModePlan, select_mode
from narwhal_profile_cli._options import ProfileOptions
from narwhal_profile_cli._progress import Progress
from narwhal_profile_cli._verify import (
    check_fresh_file,
    probe_document,
    probe_targets,
    run_verify,
    write_probe,
)
from narwhal_profile_cli.results._merge import merge_into
from narwhal_profile_cli.results._quality import fit_figures
from narwhal_profile_cli.results._refit import refit_from_samples
from narwhal_profile_cli.results._result import CommandResult
from narwhal_profile_cli.results._writer import LiveState
from narwhal_profile_cli.sweeps._groups import shard_store_path
from narwhal_store import (
    LimitsFile,
    LoadedFleet,
    StoreError,
    load_fleet,
    load_limits,
    read_store,
    sidecar_path,
)

T = TypeVar("T")


def _fleet(path: Path) -> LoadedFleet:
    try:
        return load_fleet(path)
    except StoreError as exc:
        raise ProfileUsageError(f"--fleet: {exc}", code="bad_fleet") from exc


def _limits(path: Path | None, fleet: LoadedFleet) -> LimitsFile | None:
    if path is None:
        return None
    try:
        return load_limits(path, fleet)
    except StoreError as exc:  # FormatError included
        raise ProfileUsageError(f"--limits: {exc}", code="bad_limits") from exc


@contextlib.contextmanager
def _store_errors(flag: str) -> Iterator[None]:
    """A store error escaping a refit or merge: unusable input or destination (exit 2)."""
    try:
        yield
    except StoreError as exc:
        raise ProfileUsageError(f"{flag}: {exc}", code="store") from exc


def execute(options: ProfileOptions, result: CommandResult, *, stderr: TextIO) -> None:
    """Select the mode and run it, filling ``result``; raises ProfileError subclasses on failure."""
    plan = select_mode(options)
    result.mode = plan.mode
    fleet = _fleet(plan.fleet)
    limits = _limits(options.limits, fleet)
    if plan.mode == "refit":
        _refit(plan, options, fleet, result)
    elif plan.mode == "merge":
        _merge(plan, options, fleet, result)
    elif plan.mode == "verify":
        _verify(plan, options, fleet, limits, result, stderr)
    else:
        _live(plan, options, fleet, limits, result, stderr)


def _required(path: Path | None, message: str) -> Path:
    """A path the mode needs (``select_mode`` already refused its absence)."""
    if path is None:
        raise ProfileUsageError(message)
    return path


def _refit(
    plan: ModePlan, options: ProfileOptions, fleet: LoadedFleet, result: CommandResult
) -> None:
    out = _required(plan.out, "--refit-samples requires --out PATH")
    samples = _required(options.refit_samples, "--refit-samples PATH is required")
    result.path, result.samples_path = out, sidecar_path(out)
    with _store_errors("--refit-samples"):
        written = refit_from_samples(fleet, samples, out)
    result.profiles = len(written.store.profiles)
    result.fits = fit_figures(written.store.profiles)


def _merge(
    plan: ModePlan, options: ProfileOptions, fleet: LoadedFleet, result: CommandResult
) -> None:
    out = _required(plan.out, "--merge requires --out PATH")
    result.path, result.samples_path = out, sidecar_path(out)
    with _store_errors("--merge"):
        written = merge_into(fleet, list(options.merge), out)
    result.profiles = len(written.store.profiles)
    result.fits = fit_figures(written.store.profiles)


def run_interruptibly(sweep: Coroutine[Any, Any, T], state: LiveState) -> T:
    """``sweep`` on a new event loop (``_interruptible``); ``KeyboardInterrupt`` when Ctrl-C came
    and the sweep swallowed its cancellation and returned."""
    done = asyncio.run(_interruptible(sweep, state))
    if state.interrupted:
        raise KeyboardInterrupt
    return done


async def _interruptible(sweep: Coroutine[Any, Any, T], state: LiveState) -> T:
    """Run the sweep with Ctrl-C recorded in ``state`` as well as cancelling it: a cancellation
    that some library swallows (seen once on a loaded machine: the sweep ran on and exited 0)
    still stops the sweep before its next profile is written, and the command exits 130."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()

    def on_sigint() -> None:
        state.interrupted = True
        if task is not None:
            task.cancel()

    try:
        loop.add_signal_handler(signal.SIGINT, on_sigint)
    except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, or no signals
        return await sweep
    try:
        return await sweep
    finally:
        loop.remove_signal_handler(signal.SIGINT)


def _live(
    plan: ModePlan,
    options: ProfileOptions,
    fleet: LoadedFleet,
    limits: LimitsFile | None,
    result: CommandResult,
    stderr: TextIO,
) -> None:
    path = shard_store_path(fleet.profiles_path, options.scale.shard)
    result.path, result.samples_path = path, sidecar_path(path)
    progress = Progress.for_stream(stderr)
    state = LiveState()
    try:
        run_interruptibly(
            run_live(
                fleet,
                only=options.only,
                limits=limits,
                sweep=options.sweep,
                colocation=plan.colocation,
                overwrite=options.overwrite,
                progress=progress,
                state=state,
                scale=options.scale,
                keepalive_expiry_s=options.keepalive_expiry_s,
                warn=lambda message: progress.warn(f"narwhal-profile: warning: {message}"),
                limits_path=options.limits,
            ),
            state,
        )
    except (KeyboardInterrupt, asyncio.CancelledError):
        kept = (
            f"{state.written} finished profile(s) kept in {path}"
            if state.written
            else "no profile was finished, nothing was written"
        )
        raise ProfileInterrupted(f"interrupted; {kept}") from None
    finally:
        progress.close()
        result.profiles = state.written
        result.fits = fit_figures([m.profile for m in state.kept()])


def _verify(
    plan: ModePlan,
    options: ProfileOptions,
    fleet: LoadedFleet,
    limits: LimitsFile | None,
    result: CommandResult,
    stderr: TextIO,
) -> None:
    """The freshness probe: every check before any engine is contacted (the destination, the
    store, a profile for each engine's current key), then the probe, then the document."""
    out = _required(plan.out, "--verify requires --out PATH")
    store_path = _required(options.verify, "--verify STORE is required")
    threshold = plan.threshold
    if threshold is None:  # pragma: no cover - select_mode always sets it for verify
        raise ProfileUsageError("--verify needs a threshold")
    result.path = out
    check_fresh_file(out)
    with _store_errors("--verify"):
        store = read_store(store_path)
    targets = probe_targets(fleet, store, options.only)
    progress = Progress.for_stream(stderr)
    state = LiveState()
    try:
        drifts = run_interruptibly(
            run_verify(
                targets,
                threshold=threshold,
                limits=limits,
                progress=progress,
                state=state,
                keepalive_expiry_s=options.keepalive_expiry_s,
                warn=lambda message: progress.warn(f"narwhal-profile: warning: {message}"),
                limits_path=options.limits,
            ),
            state,
        )
    except (KeyboardInterrupt, asyncio.CancelledError):
        raise ProfileInterrupted("interrupted; nothing was written") from None
    finally:
        progress.close()
    doc = probe_document(fleet, store, store_path, threshold, drifts)
    write_probe(out, doc)
    result.profiles = len(doc.engines)
    result.probe = doc
