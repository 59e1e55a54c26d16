"""``edge.json`` (``narwhal.trial.edge``): a measured capacity search, its trials and its bracket;
and reading an edge folder back (the document and every trial's run folder)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from pydantic import Field

from narwhal_store import ClosedModel
from narwhal_trial._errors import ReadError
from narwhal_trial.documents._runfolder import TrialRun, read_document, read_run
from narwhal_trial.edge._search import Stop, Verdict

EDGE_FORMAT: Final = "narwhal.trial.edge"
EDGE_FILE = "edge.json"


class EdgeInputs(ClosedModel):
    """What the search was asked: the run's settings shared by every trial, and the search's."""

    base_url: str
    workload: str = Field(description="the workload file, as given")
    workload_sha256: str = Field(description="SHA-256 of the workload file's bytes")
    model: str
    input_tokens: int
    output_tokens: int
    requests: int = Field(description="offers per trial")
    ttft_s: str
    tpot_s: str
    attainment: str
    max_in_flight: int
    max_lag_s: float
    tolerance: float = Field(description="stop when lowest_miss / highest_pass - 1 ≤ this")
    max_trials: int = Field(description="the budget: every trial run counts, repeats included")
    max_repeats: int = Field(description="repeats of a rate whose trial was invalid or in error")
    start: Literal["band", "doubling"] = Field(
        description="band: from the predicted band; doubling: from start_rate, doubled on a pass "
        "and halved on a miss until both ends exist"
    )
    start_rate: float = Field(description="the first rate (or speedup) tried")
    min_rate: float = Field(description="the lowest rate (or speedup) a trial may be offered at")
    max_rate: float = Field(description="the highest rate (or speedup) a trial may be offered at")
    searched: Literal["rate", "speedup"] = Field(
        default="rate",
        description="what the search varies: the runbook's --rate, or a scheduled workload's "
        "--speedup; start_rate, min_rate, max_rate, the bracket and each trial's value are then "
        "speedups",
    )


class PredictedBand(ClosedModel):
    """The band ``predict`` gave from the profiles, which the search started from."""

    pass_90: float | None = Field(description="highest rate predicted to pass with p ≥ 0.9")
    pass_50: float | None = Field(description="highest rate predicted to pass with p ≥ 0.5")
    pass_10: float | None = Field(description="highest rate predicted to pass with p ≥ 0.1")
    sustainable_rate: float | None = Field(
        default=None,
        description="the highest rate the fleet keeps up with for as long as a trial lasts "
        "(requests/s; null when not predicted: no passing rate, or a document of format_version 1)",
    )
    sustainable_source: Literal["long trial", "throughput bound"] | None = Field(
        default=None, description="how the sustainable rate was found (predict's document)"
    )
    replications: int
    fleet: str
    fleet_sha256: str
    profiles: str
    profiles_sha256: str
    generator: str = Field(description="the predictor: narwhal-trial <version>")


class EdgeTrial(ClosedModel):
    """One trial of the search: a normal run folder, and its verdict as the search read it."""

    index: int = Field(description="1, 2, … in the order run")
    rate: float = Field(description="the offered rate (a scheduled workload's: its mean rate)")
    speedup: float | None = Field(
        default=None, description="a scheduled workload's trial: its --speedup (the searched value)"
    )
    run: str = Field(description="the run folder, relative to the edge folder")
    repeat: int = Field(description="0 the first trial at this rate; 1, 2… its repeats")
    verdict: Verdict = Field(
        description="pass: exit 0; miss: exit 2 with a valid schedule; invalid: exit 2 with "
        "client_schedule_valid false (repeated, never read as a miss); error: exit 1 (repeated); "
        "interrupted: exit 130"
    )
    good: int
    required_good: int
    requests: int
    attainment: float
    client_schedule_valid: bool
    exit_code: int = Field(description="the run's exit code (summary.json)")
    error: str | None = Field(description="the run's blocking error, if any")


class EdgeBracket(ClosedModel):
    """The highest rate that passed and the lowest that missed."""

    highest_pass: float | None
    lowest_miss: float | None
    width: float | None = Field(description="lowest_miss / highest_pass - 1; null until both")
    within_tolerance: bool


class EdgeSearch(ClosedModel):
    """``edge.json``: rewritten (atomically) after every trial, so an interrupted search keeps what
    it found; ``stop`` and ``exit_code`` are null until it ends."""

    format: Literal["narwhal.trial.edge"] = EDGE_FORMAT
    format_version: Literal[1, 2] = Field(
        default=2, description="2 adds the predicted sustainable rate; 1 is still read"
    )
    generator: str = Field(description="narwhal-trial <version>")
    started: str = Field(description="UTC wall-clock time when the search started (ISO 8601)")
    command: list[str]
    inputs: EdgeInputs
    predicted: PredictedBand | None = Field(description="null without --profiles")
    trials: list[EdgeTrial]
    bracket: EdgeBracket
    stop: Stop | None = Field(
        description="why the search ended (null while it runs): within tolerance (exit 0); budget "
        "or rate bounds (exit 2); invalid or error, a rate that stayed so (exit 1); interrupted "
        "(exit 130)"
    )
    message: str | None = Field(description="the search's last line, null while it runs")
    exit_code: int | None


@dataclass(frozen=True, slots=True)
class EdgeRun:
    """An edge folder as read: its ``edge.json`` and the run folder of every trial it lists."""

    path: Path
    search: EdgeSearch
    runs: list[TrialRun]


def is_edge_folder(path: Path) -> bool:
    """True when ``path`` is a folder (not a symlink) holding an ``edge.json``."""
    return path.is_dir() and not path.is_symlink() and (path / EDGE_FILE).is_file()


def read_edge(path: Path) -> EdgeRun:
    """Read an edge folder; ``ReadError`` names ``edge.json`` (and the field) or the trial run
    folder that is missing or invalid. A trial's run must be at the rate the document says."""
    file = path / EDGE_FILE
    doc = read_document(file, EdgeSearch)
    runs = []
    for trial in doc.trials:
        folder = path / trial.run
        if Path(trial.run).name != trial.run or trial.run in ("", ".", ".."):
            raise ReadError(f"{file}: trial {trial.index}: run {trial.run!r} is not a folder name")
        run = read_run(folder)
        if run.manifest.rate != trial.rate:
            raise ReadError(
                f"{folder}: a run at {run.manifest.rate:g} request/s, but {EDGE_FILE} says trial "
                f"{trial.index} ran at {trial.rate:g}"
            )
        speedup = run.manifest.arguments.get("speedup")
        if speedup != trial.speedup:
            raise ReadError(
                f"{folder}: a run at speedup {speedup}, but {EDGE_FILE} says trial "
                f"{trial.index} ran at speedup {trial.speedup}"
            )
        runs.append(run)
    return EdgeRun(path, doc, runs)
