"""``run``: drain, warm up, drain, then every offer on its absolute schedule; records, summary, exit
code."""

from __future__ import annotations

import asyncio
import contextlib
import math
import resource
import signal
import sys
import time
import traceback
import uuid
from collections.abc import Awaitable, Coroutine
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from narwhal_engine_client import EngineClient, EngineClientError, SendDeadlineError, gc_paused
from narwhal_trial._clock import Clock
from narwhal_trial._errors import TrialError
from narwhal_trial._files import atomic_write, document_bytes, make_private_dir
from narwhal_trial.documents._records import LaunchRecordCopy, Manifest, MissReason, Summary
from narwhal_trial.run._drain import wait_drained
from narwhal_trial.run._event_loop import LoopFactory, resolve_loop
from narwhal_trial.run._judge import Bounds, Outcome, judge, status_of
from narwhal_trial.run._loop_lag import LoopLagMonitor
from narwhal_trial.run._manifest import build_manifest
from narwhal_trial.run._pacing import ScheduleLimits, pace
from narwhal_trial.run._probe import probe_request_fields
from narwhal_trial.run._progress import RunProgress
from narwhal_trial.run._replay import check_timing
from narwhal_trial.run._schedule_view import schedule_view
from narwhal_trial.run._settings import RUN_FILES, RunSettings, receiver_address
from narwhal_trial.run._summary import RunFacts, summarize
from narwhal_trial.run._writer import RecordWriter
from narwhal_trial.server._frontend import read_frontend_scheduler, read_server_version
from narwhal_trial.server._launch import LaunchRecord, keep, read_launch_records, refuse_caching_on
from narwhal_trial.server._otlp_receiver import Receiver, check_listen
from narwhal_trial.server._report import SpanInputs, write_server_view
from narwhal_trial.server._spans import wait_for_spans
from narwhal_trial.server._watch import ServerWatch, server_targets
from narwhal_trial.workload._file import LoadedWorkload, load_workload, request_body, sampler_of
from narwhal_trial.workload._prepare import fitting_model
from narwhal_trial.workload._schedule import due_offsets_ns

T = TypeVar("T")
START_LEAD_NS = 20_000_000
"""t0 is this far after the moment the measured phase begins, so offer 0 is paced like the
others."""


def internal_error(exc: BaseException) -> str:
    """One line for a bug: the exception, its message, and the frame that raised it (the first
    of a group's, as anyio's task groups under httpx wrap them)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" (at {Path(frames[-1].filename).name}:{frames[-1].lineno} in {frames[-1].name})"
    message = str(exc) or "no message"
    return f"internal error: {type(exc).__name__}: {message}" + (where if frames else "")


class _Interrupted(Exception):
    """SIGINT arrived; the run stops offering and closes what is in flight."""


def run_trial(settings: RunSettings, *, clock: Clock = time.perf_counter_ns) -> Summary:
    """Run one trial and return its summary (also written to ``--out/summary.json``).

    Raises TrialUsageError (bad values, a launch record that does not show prefix caching off),
    WorkloadError (an unusable workload file), ReadError (an unreadable launch record) or
    OutputPathError (an ``--out`` holding a run, or one that cannot be created) before anything
    is written or sent; every later failure ends up in the summary.
    """
    settings.validate()
    loaded = load_workload(settings.workload_path)
    check_timing(loaded.workload, f"workload {settings.workload_path}", settings)
    records = read_launch_records(settings.launch_records)
    refuse_caching_on(records)
    targets = (
        server_targets(settings.base_url, settings.fleet, settings.engine_metrics)
        if settings.server_metrics
        else []
    )
    if settings.otlp_receiver is not None:
        check_listen(*receiver_address(settings.otlp_receiver))
    loop = resolve_loop(settings.loop)  # a uvloop that cannot be imported: refused here
    make_private_dir(settings.out, holds=RUN_FILES)
    trial = _Trial(settings, loaded, records, clock, loop)
    trial.watch = ServerWatch(targets) if targets else None
    return trial.execute()


class _Trial:
    """One run in progress: its settings, ids and bounds, the state of its offers, and what
    its steps make. ``manifest`` and ``writer`` are made when the run folder is opened and
    ``warm_body`` when the bodies are encoded, before any step reads them."""

    manifest: Manifest
    writer: RecordWriter
    warm_body: bytes

    def __init__(
        self,
        settings: RunSettings,
        loaded: LoadedWorkload,
        launch_records: list[LaunchRecord],
        clock: Clock,
        loop: tuple[LoopFactory | None, str],
    ) -> None:
        self.settings = settings
        self.loop_factory, self.loop_name = loop
        self.launch_records = launch_records
        self.workload = loaded.workload
        self.loaded = loaded
        self.clock = clock
        self.run_id = f"trial-{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:8]}"
        self.warmup_id = f"{self.run_id}-warmup"
        self.ids = [f"{self.run_id}-{n:06d}" for n in range(settings.requests)]
        self.limits = ScheduleLimits(settings.max_in_flight, round(settings.max_lag_s * 1e9))
        schedule = self.workload.schedule
        self.offsets = (
            due_offsets_ns(settings.requests, settings.rate)
            if schedule is None
            else schedule.offsets_ns(settings.speedup or 1.0)
        )
        self.facts = RunFacts(
            run_id=self.run_id,
            requests=settings.requests,
            rate=settings.rate,
            attainment=settings.attainment,
            max_lag_s=settings.max_lag_s,
        )
        self.bounds = Bounds(
            settings.ttft_s,
            settings.tpot_s,
            self.workload.output_tokens,
            None if schedule is None else tuple(schedule.output_tokens),
        )
        self.keys = settings.api_keys()
        self.t0 = 0
        self.in_flight = 0  # offers written to the wire and not finished
        self.unsent: dict[int, int] = {}  # dispatched offers not yet on the wire: sequence -> due
        self.open: set[int] = set()
        self.tasks: set[asyncio.Task[None]] = set()
        self.phase: asyncio.Future[Any] | None = None
        self.client: EngineClient | None = None
        self.bodies: list[bytes] = []
        self.watch: ServerWatch | None = None
        self.receiver: Receiver | None = None
        self.receiver_counts: dict[str, int] = {}
        self.spans_waited_s = 0.0
        self.completed_ids: set[str] = set()

    # -- the synchronous frame: files, the loop, the summary --
    def execute(self) -> Summary:
        """Write the manifest, run the offers on the event loop, then the server view and the
        summary: the run folder's files in the order a reader may need them."""
        self._open_records()
        try:
            with asyncio.Runner(loop_factory=self.loop_factory) as runner:
                runner.run(self._main())
        except KeyboardInterrupt:
            self.facts.interrupted = True
        finally:
            self.writer.close()
        if self.writer.error is not None and self.facts.error is None:
            self.facts.error = f"cannot write requests.jsonl: {self.writer.error}"
        summary = self._with_server_view(self._summarize())
        self._write_summary(summary)
        return summary

    def _open_records(self) -> None:
        """Keep the launch records, write the manifest and open ``requests.jsonl``."""
        out = self.settings.out
        try:
            kept = [
                LaunchRecordCopy(file=file, source=str(r.path.absolute()), sha256=r.sha256)
                for file, r in keep(self.launch_records, out)
            ]
        except OSError as exc:
            raise TrialError(f"cannot keep the launch records in {out}: {exc}") from exc
        self.manifest = build_manifest(
            self.settings,
            self.loaded,
            run_id=self.run_id,
            start_time=datetime.now(UTC).isoformat(timespec="milliseconds"),
            warmup_request_id=self.warmup_id,
            event_loop=self.loop_name,
            launch_records=kept,
        )
        try:
            self._write_manifest()
            self.writer = RecordWriter(
                out / "requests.jsonl", lambda o: judge(o, self.t0, self.bounds)
            )
        except OSError as exc:
            raise TrialError(f"cannot write the run records in {out}: {exc}") from exc

    def _with_server_view(self, summary: Summary) -> Summary:
        """``server.json`` when the engines' pages were read, and the summary that cites it; a
        failure to write it leaves the verdict standing and says what was not written."""
        if self.watch is None or not self.watch.last:
            return summary
        out = self.settings.out
        spans = (
            None
            if self.receiver is None
            else SpanInputs(
                self.receiver.address,
                self.receiver_counts,
                self.receiver.spans_path,
                self.spans_waited_s,
            )
        )
        try:
            return write_server_view(
                out=out,
                run_id=self.run_id,
                warmup_id=self.warmup_id,
                watch=self.watch,
                records=list(self.writer.records),
                summary=summary,
                spans=spans,
            )
        except OSError as exc:
            if self.facts.error is None:
                self.facts.error = f"cannot write the server view in {out}: {exc}"
            return self._summarize()

    def _write_summary(self, summary: Summary) -> None:
        """``summary.json``; a runbook run's has no schedule key (its file is what it always
        was)."""
        path = self.settings.out / "summary.json"
        exclude = {"schedule"} if summary.schedule is None else None
        try:
            atomic_write(
                path,
                document_bytes(summary.model_dump(mode="json", by_alias=True, exclude=exclude)),
            )
        except OSError as exc:
            raise TrialError(f"cannot write {path}: {exc}") from exc

    def _summarize(self) -> Summary:
        summary = summarize(self.writer.records, self.facts)
        sched = self.workload.schedule
        if sched is None:
            return summary
        view = schedule_view(sched, self.settings.speedup or 1.0, self.writer.records)
        return summary.model_copy(update={"schedule": view})

    # -- the asynchronous phases --
    async def _main(self) -> None:
        loop = asyncio.get_running_loop()
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signal.SIGINT, self._on_sigint)
        try:
            if self.settings.otlp_receiver is not None:
                host, port = receiver_address(self.settings.otlp_receiver)
                self.receiver = await asyncio.to_thread(Receiver, host, port, self.settings.out)
            async with self.keys.client(
                self.settings.base_url,
                timeout_s=self.settings.request_timeout_s,
                max_connections=self.settings.max_in_flight + 16,
                clock_ns=self.clock,
                stream_transport=self.settings.stream_transport,
                keepalive_expiry_s=self.settings.keepalive_expiry_s,
            ) as client:
                self.client = client
                await self._guard(self._before(client))
                await self._measure()
        except _Interrupted:
            self.facts.interrupted = True
        except TrialError as exc:
            self.facts.error = self.keys.refusal(exc) or exc.message
        except Exception as exc:
            self.facts.error = internal_error(exc)
        finally:
            if self.receiver is not None:
                self.receiver_counts = await asyncio.to_thread(self.receiver.stop)
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(signal.SIGINT)

    def _on_sigint(self) -> None:
        self.facts.interrupted = True
        if self.phase is not None and not self.phase.done():
            self.phase.cancel()

    async def _guard(self, coro: Awaitable[T]) -> T:
        """Run one phase as a task that SIGINT cancels; raise _Interrupted when it does."""
        if self.facts.interrupted:
            if isinstance(coro, Coroutine):
                coro.close()
            raise _Interrupted
        task = asyncio.ensure_future(coro)
        self.phase = task
        try:
            return await task
        except asyncio.CancelledError:
            if self.facts.interrupted:
                raise _Interrupted from None
            raise
        finally:
            self.phase = None

    def _write_manifest(self) -> None:
        atomic_write(
            self.settings.out / "manifest.json",
            document_bytes(self.manifest.model_dump(mode="json")),
        )

    async def _before(self, client: EngineClient) -> None:
        """Check the model still fits; drain; probe the request fields (kept in the manifest,
        written again) and build every body; one unscored warm-up of the full shape; drain."""
        w = self.workload
        await fitting_model(
            client,
            w.model,
            input_tokens=w.input_tokens,
            output_tokens=w.output_tokens,
            max_model_len=self.settings.max_model_len,
            prepared_from=w.served_by,
        )
        await self._drain(client)
        fields = await probe_request_fields(
            client, w, self.warmup_id, timeout_s=self.settings.request_timeout_s
        )
        self.manifest = self.manifest.model_copy(
            update={
                "request_fields": fields,
                "frontend_scheduler": await read_frontend_scheduler(client, w.model),
                "server_version": await read_server_version(client),
            }
        )
        try:
            self._write_manifest()
        except OSError as exc:
            raise TrialError(f"cannot write {self.settings.out / 'manifest.json'}: {exc}") from exc
        if fields.omitted:
            left_out = ", ".join(f.field for f in fields.omitted)
            print(  # noqa: T201 - the run's one line about its request, beside its progress
                f"run: {self.settings.base_url} refuses {left_out}: left out of every request "
                f"(tokens counted by {fields.token_counting}; manifest.json request_fields)",
                file=sys.stderr,
                flush=True,
            )
        sampler = sampler_of(w)  # one for the run: a trace's shared blocks are drawn once
        self.bodies = [request_body(w, n, fields, sampler) for n in range(self.settings.requests)]
        self.warm_body = request_body(w, self.settings.requests, fields, sampler)
        warm = await client.stream_completion(
            self.warm_body, request_id=self.warmup_id, timeout_s=self.settings.request_timeout_s
        )
        self.facts.warmup_status = status_of(warm)
        if not warm.ok:
            refused = self.keys.refusal(warm.error, f"{client.base_url}/v1/completions")
            raise TrialError(refused or f"warm-up request failed ({status_of(warm)}): {warm.error}")
        if warm.completion_tokens != w.output_tokens:
            raise TrialError(
                f"warm-up returned {warm.completion_tokens} of {w.output_tokens} output tokens"
            )
        await self._drain(client)
        await self._preconnect(client, (warm.end_ns or warm.send_ns) - warm.send_ns)

    async def _preconnect(self, client: EngineClient, warm_ns: int) -> None:
        """Open about as many connections as will be in flight (rate x the warm-up's duration,
        plus a quarter), so the first offers do not each pay a TCP connect at their due time."""
        want = min(
            self.settings.max_in_flight, math.ceil(self.settings.rate * warm_ns / 1e9 * 1.25) + 1
        )
        try:
            self.facts.preconnected = await client.preconnect(want)
        except EngineClientError as exc:
            raise TrialError(
                f"cannot open {want} connections to {self.settings.base_url} before the run: {exc}"
            ) from exc

    async def _drain(self, client: EngineClient) -> None:
        gauges = self.settings.drain[1]
        if not gauges:  # --drain-preset none: the operator drains the fleet another way
            return
        took = await wait_drained(
            client,
            gauges,
            timeout_s=self.settings.drain_timeout_s,
            poll_s=self.settings.drain_poll_s,
            clock=self.clock,
        )
        self.facts.drain_s.append(took)

    async def _measure(self) -> None:
        """Read the server's pages, offer everything, read them again; wait for the spans."""
        if self.watch is not None:
            await self._guard(self.watch.before(self.client))
        with gc_paused():
            await self._offer_all()
        if self.facts.interrupted:
            return
        if self.watch is not None:
            await self._guard(self.watch.after(self.client, len(self.completed_ids)))
        if self.receiver is not None:
            self.spans_waited_s = await self._guard(
                wait_for_spans(
                    self.receiver.spans_path,
                    set(self.completed_ids),
                    self.warmup_id,
                    self.settings.otlp_wait_s,
                    roles=self.watch.roles() if self.watch is not None else {},
                    output_tokens=self._expected_tokens(),
                )
            )

    def _expected_tokens(self) -> int | dict[str, int]:
        sched = self.workload.schedule
        if sched is None:
            return self.workload.output_tokens
        return dict(zip(self.ids, sched.output_tokens, strict=True))

    async def _offer_all(self) -> None:
        monitor = LoopLagMonitor(self.clock)
        before = resource.getrusage(resource.RUSAGE_SELF)
        self.t0 = self.clock() + START_LEAD_NS
        progress = RunProgress(
            sys.stderr,
            requests=self.settings.requests,
            rate=self.settings.rate,
            t0_ns=self.t0,
            clock=self.clock,
            in_flight=lambda: self.in_flight,
            finished=lambda: len(self.writer.records),
        )
        monitor.start()
        progress.start()
        try:
            await self._guard(
                pace(
                    self.t0,
                    self.offsets,
                    clock=self.clock,
                    limits=self.limits,
                    in_flight=self._committed,
                    dispatch=self._dispatch,
                )
            )
            if self.tasks:
                await self._guard(asyncio.gather(*self.tasks))
        except _Interrupted:
            self.facts.interrupted = True
            for task in list(self.tasks):
                task.cancel()
            await asyncio.gather(*self.tasks, return_exceptions=True)
        finally:
            await progress.stop()
            await monitor.stop()
            after = resource.getrusage(resource.RUSAGE_SELF)
            self.facts.cpu_user_s = after.ru_utime - before.ru_utime
            self.facts.cpu_system_s = after.ru_stime - before.ru_stime
            self.facts.peak_rss_bytes = after.ru_maxrss * 1024
            self.facts.loop_lag_s = monitor.samples
            now = self.clock()
            for n in sorted(self.open):  # dispatched, but cancelled before its task ever ran
                due = self.t0 + self.offsets[n]
                self._finish(Outcome(n, self.ids[n], due, now, 0, interrupted=True))

    def _committed(self) -> int:
        """What the cap counts: offers on the wire, plus dispatched ones that may still get there
        (within their lag limit); an offer past it will be refused for lag, so it is not counted."""
        oldest = self.clock() - self.limits.max_lag_ns
        return self.in_flight + sum(1 for due in self.unsent.values() if due >= oldest)

    def _on_wire(self, n: int) -> None:
        del self.unsent[n]
        self.in_flight += 1
        self.facts.max_in_flight_seen = max(self.facts.max_in_flight_seen, self.in_flight)

    def _dispatch(self, n: int, due: int, now: int, miss: MissReason | None, flying: int) -> None:
        if miss is not None:
            self._finish(Outcome(n, self.ids[n], due, now, flying, miss=miss))
            return
        self.unsent[n] = due
        self.open.add(n)
        task = asyncio.get_running_loop().create_task(self._offer(n, due, now, flying))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _offer(self, n: int, due: int, decided: int, flying: int) -> None:
        assert self.client is not None
        start = self.clock()
        try:
            # The lag limit is judged by the engine client on the send stamp itself: an offer whose
            # head would start onto the wire more than max_lag after its due time is not sent.
            stream = await self.client.stream_completion(
                self.bodies[n],
                request_id=self.ids[n],
                timeout_s=self.settings.request_timeout_s,
                send_by_ns=due + self.limits.max_lag_ns,
                on_sent=lambda: self._on_wire(n),
            )
        except asyncio.CancelledError:
            self._finish(
                Outcome(
                    n,
                    self.ids[n],
                    due,
                    decided,
                    flying,
                    interrupted=True,
                    start_ns=start,
                    end_ns=self.clock(),
                )
            )
            return
        finally:
            if self.unsent.pop(n, None) is None:
                self.in_flight -= 1
        if isinstance(stream.error, SendDeadlineError):
            outcome = Outcome(
                n, self.ids[n], due, stream.send_ns, flying, miss="lag", resends=stream.resends
            )
            self._finish(outcome)
            return
        self._finish(Outcome(n, self.ids[n], due, decided, flying, stream=stream))

    def _finish(self, outcome: Outcome) -> None:
        self.open.discard(outcome.sequence)
        if outcome.stream is not None and outcome.stream.ok:
            self.completed_ids.add(outcome.request_id)
        self.writer.put(outcome)
