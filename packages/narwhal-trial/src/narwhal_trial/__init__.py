"""narwhal_trial: the synthetic deployment trial, an open-loop client that proves its schedule.

``prepare`` builds a workload (``build_workload``) from the served model's seed completion;
``run_trial`` drains the fleet, warms it up and offers every request at ``t0 + n / rate``, recording
schedule misses instead of sending late; ``run_checks`` and ``reconcile`` are the runbook's checks
before and after; ``read_run`` reads a finished run folder back through its models; ``predict``
(``load_model``, ``predict_rate``, ``find_max_rate``; ``probe_model`` draws each engine's speed from
a freshness probe, as far as ``ProbeTrust`` believes it) foretells a trial's attainment and its
highest passing rate from the profiles in virtual time, contacting nothing; ``read_edge`` reads the
folder of an ``edge`` search (the measured capacity search: ``edge.json`` and a run folder per
trial); ``compare_sides`` judges two deployments' runs, edges and profiles against each other
(``Comparison``). ``ServerDoc`` (``server.json``) and ``ServerView`` (the summary's ``server``) are
the server's own view of a run: its ``/metrics`` deltas and spans against the client's records. The
command is ``narwhal-trial`` (``narwhal_trial.cli``).
"""

from narwhal_trial._access import DEFAULT_API_KEY_ENV, ApiKeyEnv
from narwhal_trial._errors import (
    DrainError,
    NotComparableError,
    OutputPathError,
    PrepareError,
    ReadError,
    TrialError,
    TrialUsageError,
    WorkloadError,
)
from narwhal_trial._schemas import json_schemas, schema_bytes, write_schemas
from narwhal_trial._stats import required_good, wilson_interval
from narwhal_trial.checks._check import run_checks
from narwhal_trial.checks._reconcile import Reconciliation, read_journal, reconcile
from narwhal_trial.compare._compare import CompareRequest, compare_sides
from narwhal_trial.compare._sides import CompareSide, read_compare_side
from narwhal_trial.documents._comparison import (
    Comparison,
    Difference,
    EdgeVerdict,
    FitChange,
    ProportionVerdict,
    RatePair,
    ShiftVerdict,
    SideFacts,
)
from narwhal_trial.documents._prediction import Prediction
from narwhal_trial.documents._records import (
    STATUSES,
    Distribution,
    Manifest,
    RequestRecord,
    Status,
    Summary,
)
from narwhal_trial.documents._runfolder import TrialRun, is_run_folder, read_requests, read_run
from narwhal_trial.documents._schedule import (
    DensestSecond,
    Histogram,
    LengthBucket,
    OfferedLoad,
    ScheduleView,
)
from narwhal_trial.documents._server import (
    CounterDelta,
    EngineView,
    FleetView,
    HistogramDelta,
    HistogramView,
    PageReading,
    QuantileInterval,
    ReceiverFacts,
    ServerDoc,
    ServerPage,
    ServerTiming,
    ServerView,
    SpanView,
    TtftGap,
)
from narwhal_trial.edge._document import EdgeRun, EdgeSearch, is_edge_folder, read_edge
from narwhal_trial.predictor._model import FleetModel, OutsideDomainError, TrialTarget
from narwhal_trial.predictor._predict import (
    DEFAULT_REPLICATIONS,
    PredictRequest,
    load_model,
    predict,
)
from narwhal_trial.predictor._probe_speed import DEFAULT_PROBE_WEIGHT, ProbeTrust, probe_model
from narwhal_trial.predictor._profile_domain import CheckItem
from narwhal_trial.predictor._rates import find_max_rate, predict_rate
from narwhal_trial.predictor._vtime import EngineModel, TrialShape, simulate
from narwhal_trial.run._drain import DEFAULT_GAUGES, DRAIN_PRESETS, wait_drained
from narwhal_trial.run._pacing import ScheduleLimits, miss_reason, pace, wait_until
from narwhal_trial.run._settings import RunSettings
from narwhal_trial.run._trial import run_trial
from narwhal_trial.workload._file import (
    LoadedWorkload,
    Sampling,
    SeedPrompt,
    Workload,
    load_workload,
    prompt_ids,
    request_body,
    workload_bytes,
)
from narwhal_trial.workload._prepare import build_workload, seed_token_ids
from narwhal_trial.workload._schedule import due_offsets_ns

__all__ = [
    "DEFAULT_API_KEY_ENV",
    "DEFAULT_GAUGES",
    "DEFAULT_PROBE_WEIGHT",
    "DEFAULT_REPLICATIONS",
    "DRAIN_PRESETS",
    "STATUSES",
    "ApiKeyEnv",
    "CheckItem",
    "CompareRequest",
    "CompareSide",
    "Comparison",
    "CounterDelta",
    "DensestSecond",
    "Difference",
    "Distribution",
    "DrainError",
    "EdgeRun",
    "EdgeSearch",
    "EdgeVerdict",
    "EngineModel",
    "EngineView",
    "FitChange",
    "FleetModel",
    "FleetView",
    "Histogram",
    "HistogramDelta",
    "HistogramView",
    "LengthBucket",
    "LoadedWorkload",
    "Manifest",
    "NotComparableError",
    "OfferedLoad",
    "OutputPathError",
    "OutsideDomainError",
    "PageReading",
    "PredictRequest",
    "Prediction",
    "PrepareError",
    "ProbeTrust",
    "ProportionVerdict",
    "QuantileInterval",
    "RatePair",
    "ReadError",
    "ReceiverFacts",
    "Reconciliation",
    "RequestRecord",
    "RunSettings",
    "Sampling",
    "ScheduleLimits",
    "ScheduleView",
    "SeedPrompt",
    "ServerDoc",
    "ServerPage",
    "ServerTiming",
    "ServerView",
    "ShiftVerdict",
    "SideFacts",
    "SpanView",
    "Status",
    "Summary",
    "TrialError",
    "TrialRun",
    "TrialShape",
    "TrialTarget",
    "TrialUsageError",
    "TtftGap",
    "Workload",
    "WorkloadError",
    "build_workload",
    "compare_sides",
    "due_offsets_ns",
    "find_max_rate",
    "is_edge_folder",
    "is_run_folder",
    "json_schemas",
    "load_model",
    "load_workload",
    "miss_reason",
    "pace",
    "predict",
    "predict_rate",
    "probe_model",
    "prompt_ids",
    "read_compare_side",
    "read_edge",
    "read_journal",
    "read_requests",
    "read_run",
    "reconcile",
    "request_body",
    "required_good",
    "run_checks",
    "run_trial",
    "schema_bytes",
    "seed_token_ids",
    "simulate",
    "wait_drained",
    "wait_until",
    "wilson_interval",
    "workload_bytes",
    "write_schemas",
]
