"""The run's documents: ``manifest.json``, the lines of ``requests.jsonl`` and ``summary.json``."""

from __future__ import annotations

from typing import Final, Literal, get_args

from pydantic import ConfigDict, Field

from narwhal_store import ClosedModel
from narwhal_trial._interval import Interval
from narwhal_trial.documents._frontend import FrontendScheduler
from narwhal_trial.documents._request_fields import RequestFields
from narwhal_trial.documents._schedule import ScheduleView
from narwhal_trial.documents._server import ServerTiming, ServerView

MANIFEST_FORMAT: Final = "narwhal.trial.manifest"
REQUEST_FORMAT: Final = "narwhal.trial.request"
SUMMARY_FORMAT: Final = "narwhal.trial.summary"

Status = Literal[
    "completed",
    "http_error",
    "stream_error",
    "stream_cut",
    "timeout",
    "connect_error",
    "protocol_error",
    "client_schedule_miss",
    "interrupted",
]
"""Terminal status of one offer. ``completed`` reached ``[DONE]``; whether it was good is
separate."""

STATUSES: tuple[Status, ...] = get_args(Status)
"""Every status, in the order of ``Status`` (derived from it, so the two cannot drift)."""

MissReason = Literal["in_flight_cap", "lag"]


class AliasedDoc(ClosedModel):
    """A document that holds a key which is not a Python name (``pass``): read by alias or by field
    name, written by alias."""

    model_config = ConfigDict(
        validate_by_name=True, validate_by_alias=True, serialize_by_alias=True
    )


class Limits(ClosedModel):
    """The client limits selected for the run (the runbook's "selected limits")."""

    max_in_flight: int
    max_lag_s: float
    request_timeout_s: float
    drain_timeout_s: float
    drain_gauges: list[str]
    stream_transport: Literal["httpx", "raw"] = Field(
        default="httpx",
        description="what carried the streaming requests: httpx, or the engine client's raw "
        "HTTP/1.1 transport (``--transport auto`` resolved; manifests written before the raw "
        "transport existed lack the key and mean httpx)",
    )
    drain_preset: str | None = Field(
        default=None,
        description="the --drain-preset the drain gauges came from (none: no drain check); null "
        "for a --drain-gauge list",
    )
    keepalive_expiry_s: float | None = Field(
        default=None,
        description="--keepalive-expiry: an idle kept-alive connection older than this was never "
        "reused; null in manifests written before it was recorded",
    )


class LaunchRecordCopy(ClosedModel):
    """One launch record (``run --launch-record``) kept in the run folder."""

    file: str = Field(description="the copy, relative to the run folder (launch-records/NAME)")
    source: str = Field(description="the path it was copied from (absolute)")
    sha256: str = Field(description="SHA-256 of its bytes (the copy's and the source's)")


class Manifest(ClosedModel):
    """``manifest.json``: what ran, from where, with what, written before the first offer."""

    format: Literal["narwhal.trial.manifest"] = MANIFEST_FORMAT
    format_version: Literal[1] = 1
    run_id: str
    base_url: str
    start_time: str = Field(description="UTC wall-clock time when the run started (ISO 8601)")
    workload_path: str
    workload_digest: str = Field(description="SHA-256 of the workload file's exact bytes")
    helper_digest: str = Field(
        description="SHA-256 over the launcher and the source files of every narwhal package "
        "whose code runs during the trial"
    )
    helper_files: dict[str, str] = Field(
        description="SHA-256 of each file the helper digest covers (keys <module>/<path> and "
        "launcher/<name>)"
    )
    helper_version: str
    packages: dict[str, str] = Field(
        default_factory=dict,
        description="installed version of each narwhal distribution the helper digest covers "
        "(narwhal-trial and the narwhal packages it requires); manifests written before the "
        "digest covered them lack the key",
    )
    hostname: str
    source_revision: str = Field(
        description="git rev-parse HEAD of the helper's checkout, or unknown"
    )
    source_dirty: bool | None
    command: list[str]
    python_version: str
    httpx_version: str
    event_loop: str
    limits: Limits
    arguments: dict[str, str | int | float | bool | list[str] | None]
    model: str
    requests: int
    rate: float
    ttft_s: str
    tpot_s: str
    attainment: str
    input_tokens: int
    output_tokens: int
    warmup_request_id: str
    workload_served_by: str | None = Field(
        default=None, description="the base URL the workload was prepared from (its served_by)"
    )
    api_key_env: str | None = Field(
        default=None,
        description="the environment variable the API key was read from (the key itself is never "
        "recorded); null when no key was sent",
    )
    operator_max_model_len: int | None = Field(
        default=None,
        description="the context limit the operator supplied with --max-model-len; null when the "
        "server's own limit was used",
    )
    launch_records: list[LaunchRecordCopy] = Field(
        default_factory=list,
        description="the launch records given with --launch-record, copied into the run folder "
        "before the first request",
    )
    request_fields: RequestFields | None = Field(
        default=None,
        description="the fields every request carried, as the probe before the warm-up decided "
        "(omitted fields and why, the token counting, the probes); null when the run stopped "
        "before its probe",
    )
    frontend_scheduler: FrontendScheduler | None = Field(
        default=None,
        description="the scheduler settings the frontend publishes for the model (NVIDIA "
        "Dynamo's dynamo_frontend_model_* gauges); null when it publishes none",
    )
    server_version: str | None = Field(
        default=None,
        description="what GET /version of the base URL answered before the probe (vLLM's "
        "version, through a router that forwards it); null when it answered none",
    )


class RequestRecord(ClosedModel):
    """One line of ``requests.jsonl``: one offer, written as it ends; times in s from t0."""

    format: Literal["narwhal.trial.request"] = REQUEST_FORMAT
    format_version: Literal[1] = 1
    sequence: int
    request_id: str
    due_s: float
    sent: bool
    sent_s: float | None
    lag_s: float = Field(description="send (or miss decision) time minus due time")
    end_s: float | None
    in_flight: int = Field(
        description="requests in flight when this offer was decided, itself excluded"
    )
    status: Status
    miss_reason: MissReason | None
    http_status: int | None
    error: str | None
    ttft_s: float | None
    tpot_s: float | None
    e2e_s: float | None
    prompt_tokens: int | None
    completion_tokens: int | None
    chunks: int
    finish_reason: str | None
    bytes_sent: int
    bytes_received: int
    good: bool
    resends: int = Field(
        default=0,
        description="1 when the request was first written on a kept-alive connection that the "
        "server closed before answering, and so sent once more on a new connection (its times are "
        "the resend's; a resend past the lag limit is a lag miss)",
    )
    server: ServerTiming | None = Field(
        default=None,
        description="the engine's own timings of this request, from its trace span (run "
        "--otlp-receiver); null without spans or when none matched",
    )


class Distribution(ClosedModel):
    """count, mean, max and percentiles (linear interpolation) of one measure, seconds."""

    count: int
    mean: float | None
    max: float | None
    p50: float | None
    p90: float | None
    p95: float | None
    p99: float | None


class ClientUsage(ClosedModel):
    """What the client itself consumed, to establish client saturation before raising its limits."""

    cpu_user_s: float
    cpu_system_s: float
    cpu_per_sent_request_s: float | None
    peak_rss_bytes: int
    bytes_sent: int
    bytes_received: int
    event_loop_lag_s: Distribution
    scheduling_lag_s: Distribution
    preconnected: int = Field(
        default=0,
        description="keep-alive connections opened after the last drain, before the first offer "
        "(raw transport: about rate x the warm-up's duration x 1.25, at most --max-in-flight)",
    )
    resends: int = Field(
        default=0,
        description="offers sent once more on a new connection after a kept-alive connection "
        "closed before answering them",
    )


class Summary(AliasedDoc):
    """``summary.json``: the verdict and the measures behind it; always written, also on errors."""

    format: Literal["narwhal.trial.summary"] = SUMMARY_FORMAT
    format_version: Literal[1] = 1
    run_id: str
    requests: int = Field(description="the denominator: every planned offer")
    offered: int = Field(description="offers whose due time came (sent or recorded as a miss)")
    sent: int
    counts: dict[str, int] = Field(description="offers by terminal status")
    good: int
    required_good: int = Field(description="ceil(attainment x requests), exact decimal")
    attainment: float = Field(description="good / requests")
    attainment_target: str
    attainment_interval: Interval
    passed: bool = Field(alias="pass", description="good ≥ required_good")
    client_schedule_valid: bool
    schedule_misses: dict[str, int]
    max_lag_s: float | None
    max_in_flight: int
    ttft_s: Distribution
    tpot_s: Distribution
    e2e_s: Distribution
    offered_rate: float
    achieved_rate: float | None
    duration_s: float | None
    client: ClientUsage
    warmup_status: str | None
    drain_s: list[float]
    exit_code: int
    interrupted: bool
    error: str | None
    server: ServerView | None = Field(
        default=None,
        description="the client's records against the engines' own metrics and spans (null when "
        "no page was read: --no-server-metrics, or a run that ended before its first offer)",
    )
    schedule: ScheduleView | None = Field(
        default=None,
        description="a scheduled workload's run (prepare --trace or --arrivals): attainment per "
        "input-length bucket, the offered load over time, the densest second (absent otherwise)",
    )
