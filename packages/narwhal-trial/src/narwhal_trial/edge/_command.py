"""``edge``: a measured capacity search. Every trial is a normal run folder made by ``run_trial``;
``edge.json`` is rewritten after every trial; bad input is refused before anything is created."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path

import orjson

from narwhal_trial._errors import TrialError
from narwhal_trial._files import atomic_write, check_fresh_dir, make_private_dir
from narwhal_trial._limits import MAX_RATE
from narwhal_trial._provenance import dist_version
from narwhal_trial.documents._records import Summary
from narwhal_trial.edge._document import (
    EDGE_FILE,
    EdgeBracket,
    EdgeInputs,
    EdgeSearch,
    EdgeTrial,
    PredictedBand,
)
from narwhal_trial.edge._search import (
    Bracket,
    SearchPlan,
    Stop,
    TrialOutcome,
    band_rates,
    outcome_of,
    search,
)
from narwhal_trial.edge._settings import EdgeSettings, trial_folder
from narwhal_trial.edge._text import closing, opening, trial_line, unit
from narwhal_trial.predictor._model import TrialTarget
from narwhal_trial.predictor._predict import PredictRequest, predict
from narwhal_trial.predictor._vtime import TrialShape
from narwhal_trial.run._settings import RunSettings
from narwhal_trial.run._trial import run_trial
from narwhal_trial.server._launch import read_launch_records, refuse_caching_on
from narwhal_trial.workload._file import LoadedWorkload, load_workload


def predicted_band(settings: EdgeSettings, loaded: LoadedWorkload) -> PredictedBand:
    """The band ``predict`` gives for this trial (in process; contacts nothing). TrialUsageError
    or OutsideDomainError (exit 1) for unusable files or a trial outside the profiled domain."""
    p, run = settings.predict, settings.run
    assert p is not None
    shape = TrialShape(
        input_tokens=loaded.workload.input_tokens,
        output_tokens=loaded.workload.output_tokens,
        requests=run.requests,
        kv_transfer_s_per_token=p.kv_transfer_s_per_token,
        max_num_batched_tokens=p.max_num_batched_tokens,
        max_in_flight=run.max_in_flight,
    )
    target = TrialTarget(run.ttft_s, run.tpot_s, run.attainment)
    req = PredictRequest(
        p.fleet,
        p.profiles,
        p.limits,
        shape,
        target,
        None,
        True,
        replications=p.replications,
        seed=p.seed,
    )
    doc = predict(req)
    if doc.search is None:  # find_max_rate was asked, so the predictor always searches
        raise TrialError("the prediction holds no rate search")
    band, sustainable = doc.search.band, doc.search.sustainable
    return PredictedBand(
        pass_90=band.pass_90,
        pass_50=band.pass_50,
        pass_10=band.pass_10,
        sustainable_rate=None if sustainable is None else sustainable.rate,
        sustainable_source=None if sustainable is None else sustainable.source,
        replications=band.replications,
        fleet=str(p.fleet),
        fleet_sha256=doc.inputs.fleet_sha256,
        profiles=str(p.profiles),
        profiles_sha256=doc.inputs.profiles_sha256,
        generator=doc.generator,
    )


def _plan(settings: EdgeSettings, band: PredictedBand | None) -> SearchPlan:
    """Start at the band's pass_50 (else pass_10, else its middle rate); without a band, or one
    that holds no usable rate, double from ``--start-rate``."""
    rates = () if band is None else band_rates([band.pass_90, band.pass_50, band.pass_10], MAX_RATE)
    start = settings.start_rate
    if band is not None and rates:
        picks = [v for v in (band.pass_50, band.pass_10) if v is not None and 0 < v <= MAX_RATE]
        start = picks[0] if picks else rates[len(rates) // 2]
    return SearchPlan(
        start=start,
        band=rates,
        tolerance=settings.tolerance,
        max_trials=settings.max_trials,
        max_repeats=settings.max_repeats,
        min_rate=settings.min_rate,
        max_rate=settings.max_rate,
        searched=settings.searched,
    )


RunTrial = Callable[[RunSettings], Summary]


def edge_command(
    settings: EdgeSettings, *, emit: Callable[[str], None], run: RunTrial = run_trial
) -> int:
    """Search the measured edge; returns the exit code (0 within tolerance, 2 the budget or the
    rate bounds first, 1 a rate that stayed invalid or in error, 130 interrupted).

    Raises TrialError before anything is created for bad input, and after writing ``edge.json``
    for a blocking error while a trial ran; KeyboardInterrupt after writing it too.
    """
    settings.validate()
    check_fresh_dir(settings.out, holds=(EDGE_FILE,))
    loaded = load_workload(settings.run.workload_path)
    refuse_caching_on(read_launch_records(settings.run.launch_records))
    band = predicted_band(settings, loaded) if settings.predict is not None else None
    plan = _plan(settings, band)
    emit(opening(settings, band, plan))
    make_private_dir(settings.out, holds=(EDGE_FILE,))
    doc = _document(settings, loaded, band, plan)
    path = settings.out / EDGE_FILE
    _write(path, doc)

    def run_one(index: int, rate: float, repeat: int) -> TrialOutcome:
        return outcome_of(run(settings.trial(index, rate)))

    def observe(index: int, value: float, repeat: int, o: TrialOutcome, b: Bracket) -> None:
        doc.trials.append(_trial(settings, index, value, repeat, o))
        doc.bracket = _bracket(b)
        _write(path, doc)
        emit(trial_line(index, value, repeat, o, b, settings.max_repeats, unit(settings)))

    try:
        ending = search(plan, run_one, observe)
    except TrialError as exc:
        with contextlib.suppress(TrialError):  # edge.json itself may be what cannot be written
            _finish(path, doc, "error", f"trial {len(doc.trials) + 1}: {exc.message}", 1)
        raise
    except KeyboardInterrupt:
        with contextlib.suppress(TrialError):
            _finish(path, doc, "interrupted", "interrupted between trials", 130)
        raise
    _finish(path, doc, ending.stop, ending.message, ending.exit_code)
    emit(closing(ending, path, unit(settings)))
    return ending.exit_code


def _document(
    settings: EdgeSettings, loaded: LoadedWorkload, band: PredictedBand | None, plan: SearchPlan
) -> EdgeSearch:
    run, w = settings.run, loaded.workload
    inputs = EdgeInputs(
        base_url=run.base_url,
        workload=str(run.workload_path),
        workload_sha256=loaded.sha256,
        model=w.model,
        input_tokens=w.input_tokens,
        output_tokens=w.output_tokens,
        requests=run.requests,
        ttft_s=str(run.ttft_s),
        tpot_s=str(run.tpot_s),
        attainment=str(run.attainment),
        max_in_flight=run.max_in_flight,
        max_lag_s=run.max_lag_s,
        tolerance=settings.tolerance,
        max_trials=settings.max_trials,
        max_repeats=settings.max_repeats,
        start="band" if plan.band else "doubling",
        start_rate=Bracket(plan).first(),
        min_rate=plan.min_rate,
        max_rate=plan.max_rate,
        searched=settings.searched,
    )
    return EdgeSearch(
        generator=f"narwhal-trial {dist_version('narwhal-trial')}",
        started=datetime.now(UTC).isoformat(timespec="milliseconds"),
        command=list(run.command),
        inputs=inputs,
        predicted=band,
        trials=[],
        bracket=EdgeBracket(
            highest_pass=None, lowest_miss=None, width=None, within_tolerance=False
        ),
        stop=None,
        message=None,
        exit_code=None,
    )


def _trial(
    settings: EdgeSettings, index: int, value: float, repeat: int, o: TrialOutcome
) -> EdgeTrial:
    run = settings.trial(index, value)
    return EdgeTrial(
        index=index,
        rate=run.rate,
        speedup=run.speedup,
        run=trial_folder(index, value, settings.searched),
        repeat=repeat,
        **asdict(o),
    )


def _bracket(b: Bracket) -> EdgeBracket:
    return EdgeBracket(
        highest_pass=b.highest_pass,
        lowest_miss=b.lowest_miss,
        width=b.width,
        within_tolerance=b.within_tolerance,
    )


def _write(path: Path, doc: EdgeSearch) -> None:
    data = orjson.dumps(doc.model_dump(mode="json"), option=orjson.OPT_INDENT_2) + b"\n"
    try:
        atomic_write(path, data)
    except OSError as exc:
        raise TrialError(f"cannot write {path}: {exc}") from exc


def _finish(path: Path, doc: EdgeSearch, stop: Stop, message: str, code: int) -> None:
    doc.stop, doc.message, doc.exit_code = stop, message, code
    _write(path, doc)
