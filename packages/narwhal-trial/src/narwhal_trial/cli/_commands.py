"""The command bodies behind the CLI: each returns an exit code and prints one-line results."""

from __future__ import annotations

import asyncio
import dataclasses
import sys
from pathlib import Path

import orjson
from pydantic import BaseModel

from narwhal_trial._access import ApiKeyEnv, check_base_url
from narwhal_trial._errors import TrialError
from narwhal_trial._files import atomic_write, check_fresh_dir, check_fresh_file, make_private_dir
from narwhal_trial.checks._check import run_checks
from narwhal_trial.checks._reconcile import read_journal, reconcile
from narwhal_trial.documents._prediction import Prediction, render_text
from narwhal_trial.documents._prediction_schedule import pace_label
from narwhal_trial.documents._records import Summary
from narwhal_trial.documents._runfolder import read_requests
from narwhal_trial.predictor._predict import PredictRequest, predict
from narwhal_trial.run._schedule_view import schedule_lines
from narwhal_trial.run._settings import RunSettings
from narwhal_trial.server._frontend import read_published
from narwhal_trial.server._text import server_lines
from narwhal_trial.workload._file import workload_bytes
from narwhal_trial.workload._prepare import build_workload
from narwhal_trial.workload._schedule_options import ScheduleOptions
from narwhal_trial.workload._tokenizer import load_tokenizer

WORKLOAD_FILE = "workload.json"


def fail(prog: str, error: TrialError) -> int:
    """Print the one-line error and return its exit code."""
    print(f"{prog}: error: {error.message}", file=sys.stderr)
    return error.exit_code


def prepare_command(
    *,
    base: str,
    input_tokens: int | None,
    output_tokens: int | None,
    seed: int,
    out: Path,
    model: str | None,
    api_key_env: str | None = None,
    max_model_len: int | None = None,
    tokenizer: Path | None = None,
    schedule: ScheduleOptions | None = None,
) -> Path:
    """Build and write ``OUT/workload.json``; returns its path. Raises TrialError. The URL, the
    destination, the tokenizer and the schedule options (a trace is read and checked whole) are
    checked before the engine is contacted."""
    check_base_url(base)
    keys = ApiKeyEnv.choose(api_key_env)
    check_fresh_dir(out, holds=(WORKLOAD_FILE,))
    source = (schedule or ScheduleOptions()).source(input_tokens, output_tokens, seed)
    local = None if tokenizer is None else load_tokenizer(tokenizer)

    async def build() -> bytes:
        async with keys.client(base) as client:
            workload = await build_workload(
                client,
                input_tokens=input_tokens or 1,
                output_tokens=output_tokens or 1,
                seed=seed,
                model=model,
                max_model_len=max_model_len,
                tokenizer=local,
                schedule_source=source,
            )
        return workload_bytes(workload)

    try:
        data = asyncio.run(build())
    except TrialError as exc:
        refused = keys.refusal(exc)
        if refused is None:
            raise
        raise TrialError(refused) from exc
    make_private_dir(out, holds=(WORKLOAD_FILE,))
    path = out / WORKLOAD_FILE
    try:
        atomic_write(path, data)
    except OSError as exc:
        raise TrialError(f"cannot write {path}: {exc}") from exc
    return path


def describe(summary: Summary, settings: RunSettings) -> str:
    """A few human lines about a finished run, for stdout."""
    verdict = (
        "PASS"
        if summary.exit_code == 0
        else {1: "ERROR", 2: "MISS", 130: "INTERRUPTED"}.get(summary.exit_code, "FAIL")
    )
    interval = summary.attainment_interval
    pace = pace_label(settings.rate, settings.speedup)
    if summary.offered == 0:  # stopped before its first offer: nothing was judged
        lines = [f"{pace}: not judged: the run stopped before its first offer -> {verdict}"]
    else:
        lines = [
            f"{pace}: {summary.good}/{summary.requests} good "
            f"(need {summary.required_good}), attainment {summary.attainment:.3f} "
            f"[{interval.low:.3f}, {interval.high:.3f}] -> {verdict}",
            f"schedule {'valid' if summary.client_schedule_valid else 'INVALID'}: "
            f"{summary.sent} sent, misses {summary.schedule_misses}, max lag "
            f"{_ms(summary.max_lag_s)}, max in flight {summary.max_in_flight}",
        ]
    if summary.schedule is not None:
        lines.extend(schedule_lines(summary.schedule))
    failed = {k: v for k, v in summary.counts.items() if v and k != "completed"}
    if failed:
        lines.append(f"not completed: {failed}")
    if summary.ttft_s.count:
        lines.append(
            f"TTFT p50 {_ms(summary.ttft_s.p50)} p99 {_ms(summary.ttft_s.p99)}; "
            f"TPOT p50 {_ms(summary.tpot_s.p50)} p99 {_ms(summary.tpot_s.p99)}"
        )
    if summary.server is not None:
        lines.extend(server_lines(summary.server))
    if summary.error:
        lines.append(f"error: {summary.error}")
    lines.append(f"records in {settings.out} (exit {summary.exit_code})")
    return "\n".join(lines)


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 1000:.1f} ms"


def check_command(
    *,
    workload: Path,
    fleet: Path,
    profiles: Path,
    launch_records: list[Path],
    engines: list[str],
    api_key_env: str | None = None,
    max_model_len: int | None = None,
    probe: Path | None = None,
) -> tuple[int, str]:
    """Run every pre-trial check: exit 0 when all pass, else 2 (the judged outcome); the text lists
    every item. Raises TrialError (exit 1) when an input cannot be used at all."""
    items = run_checks(
        workload_path=workload,
        fleet_path=fleet,
        store_path=profiles,
        launch_records=launch_records,
        engines=engines,
        keys=ApiKeyEnv.choose(api_key_env),
        max_model_len=max_model_len,
        probe_path=probe,
    )
    failed = [i for i in items if not i.ok]
    lines = [f"{'ok  ' if i.ok else 'FAIL'} {i.subject}: {i.what}: {i.detail}" for i in items]
    lines.append(
        f"{len(items) - len(failed)} of {len(items)} checks passed"
        + (f"; {len(failed)} failed" if failed else "")
    )
    return (2 if failed else 0), "\n".join(lines)


def reconcile_command(
    *, requests: Path, journal: Path, as_json: bool
) -> tuple[int, str, str | None]:
    """Reconcile a run's records with the router journal; returns the exit code, the report and
    the one-line blocking error, if any.

    Exit 0 when every record reconciles, 2 when one does not (the judged outcome), 1 when a
    foreign request overlaps the trial's window (the router was not reserved: a blocking error,
    whatever the records say; the report is printed all the same). Raises TrialError (exit 1)
    when a file cannot be read.
    """
    result = reconcile(read_requests(requests), read_journal(journal))
    error = result.reservation_error()
    code = 1 if error is not None else 0 if result.ok else 2
    if as_json:
        return code, orjson.dumps(result.to_dict(), option=orjson.OPT_INDENT_2).decode(), error
    window = (
        "no times for the run's journal entries: the router's reservation cannot be checked"
        if result.window is None
        else f"{len(result.overlapping)} foreign inside the trial's window"
    )
    lines = [
        f"run {result.run_id}: {result.client_records} client records, {result.matched} matched, "
        f"{result.schedule_misses} schedule misses (absent from the journal as they must be), "
        f"{result.warmup_entries} warm-up, {result.probe_entries} probe(s), "
        f"{result.foreign_entries} foreign journal entries "
        f"({window})",
        *(f"problem: {p}" for p in result.problems),
        "reconciled" if result.ok else f"NOT reconciled: {len(result.problems)} problem(s)",
    ]
    return code, "\n".join(lines), error


def predict_command(
    req: PredictRequest, *, as_json: bool, out: Path | None, api_key_env: str | None = None
) -> tuple[int, str]:
    """Predict the trial; returns the exit code and the text (or the JSON document) to print.
    With ``req.frontend``, its published settings are read first (``api_key_env``: its key).
    Writes ``out`` (a fresh path) with the JSON document when given, whatever the verdict.

    Exit 0 when the prediction passes (``--find-max-rate`` alone: a passing rate was found), 2 when
    it misses the target (the judged outcome). Raises TrialError (exit 1) for unusable inputs and
    OutsideDomainError (exit 1) when the prediction would extrapolate beyond the profiles.
    """
    if out is not None:
        check_fresh_file(out, flag="--out")
    if req.frontend is not None and not req.published:
        req = dataclasses.replace(
            req, published=read_published(req.frontend, req.fleet, api_key_env)
        )
    doc = predict(req)
    data = write_document(doc, out)
    return prediction_exit_code(doc), (data if as_json else render_text(doc))


def write_document(doc: BaseModel, out: Path | None) -> str:
    """``doc`` as the JSON a command prints with ``--json``, also written atomically to ``out``
    (a fresh path its command checked before the work) when given."""
    data = orjson.dumps(doc.model_dump(mode="json"), option=orjson.OPT_INDENT_2)
    if out is not None:
        try:
            atomic_write(out, data + b"\n")
        except OSError as exc:
            raise TrialError(f"cannot write {out}: {exc}") from exc
    return data.decode()


def prediction_exit_code(doc: Prediction) -> int:
    """2 when the prediction misses the target: the trial at ``--rate`` is predicted to miss, or
    (``--find-max-rate`` alone) no rate is predicted to pass; else 0."""
    if doc.prediction is not None:
        return 0 if doc.prediction.passed else 2
    if doc.search is not None and doc.search.max_rate is None:
        return 2
    return 0
