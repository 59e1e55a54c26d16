"""The server's own view of a run: ``server.json`` and the ``server`` part of ``summary.json``.

``server.json`` keeps what each engine's (and the router's) ``/metrics`` page counted during the
measured phase: the deltas of its histograms and counters between a reading just before the first
offer and one just after the last stream ended. The summary's ``server`` part compares them with
the client's records (docs/design.md §14). Per-request spans (``run --otlp-receiver``) add each
record's ``server`` timings and the summary's ``server.spans``.
"""

from __future__ import annotations

from typing import Final, Literal

from pydantic import Field

from narwhal_store import ClosedModel

SERVER_FORMAT: Final = "narwhal.trial.server"

Grade = Literal["negligible", "normal", "elevated"]
"""How large the client-added share of the mean TTFT is: under 2 %, up to 10 %, beyond."""


class HistogramDelta(ClosedModel):
    """One histogram family's observations during the run, summed over its label sets."""

    bounds: list[float] = Field(description="the finite bucket upper bounds (le), ascending")
    counts: list[int] = Field(
        description="observations per bucket, not cumulative: counts[i] lies in "
        "(bounds[i-1], bounds[i]]; the last entry is above the last finite bound"
    )
    count: int
    sum: float = Field(description="the observations' sum, seconds (the exact mean is sum/count)")


class CounterDelta(ClosedModel):
    """One counter sample's increase during the run."""

    name: str = Field(description="the sample name as the page shows it (…_total)")
    labels: dict[str, str]
    delta: float


class PageReading(ClosedModel):
    """One GET of a ``/metrics`` page."""

    ok: bool
    error: str | None = Field(description="why the page could not be read or parsed; null if ok")
    wall_time: str = Field(description="UTC wall-clock time of the reading (ISO 8601)")
    elapsed_s: float = Field(description="how long the GET took")


class ServerPage(ClosedModel):
    """What one page counted during the measured phase."""

    name: str = Field(description="the engine's iid, base (the --base page), or router")
    kind: Literal["engine", "router"]
    role: Literal["prefill", "decode", "mixed"] | None = Field(
        description="the engine's fleet role; null for the router or an engine outside a fleet"
    )
    url: str = Field(description="the page's URL")
    before: PageReading
    after: PageReading
    restarted: bool | None = Field(
        description="process_start_time_seconds changed between the readings (the deltas are "
        "then meaningless and left empty); null when the page does not show it"
    )
    histograms: dict[str, HistogramDelta] = Field(
        description="by family name (vllm:time_to_first_token_seconds, ...): every histogram "
        "family on both readings"
    )
    counters: list[CounterDelta] = Field(description="every counter sample on both readings")
    missing: list[str] = Field(
        description="the vLLM families the comparison reads that this engine's page lacks "
        "(names differ across vLLM versions; docs/design.md §14)"
    )


class ReceiverFacts(ClosedModel):
    """What the OTLP/HTTP receiver (``--otlp-receiver``) took in during the run."""

    address: str = Field(description="HOST:PORT it listened on")
    exports: int = Field(description="export requests it accepted")
    rejected: int = Field(description="export requests it could not decode (answered 400)")
    spans: int = Field(description="llm_request spans it kept (spans.jsonl)")
    other_spans: int = Field(description="spans of other names, not kept")
    waited_s: float = Field(description="how long after the last stream it waited for spans")


class ServerDoc(ClosedModel):
    """``server.json``: each page's deltas over the measured phase, and the receiver's facts."""

    format: Literal["narwhal.trial.server"] = SERVER_FORMAT
    format_version: Literal[1] = 1
    run_id: str
    pages: list[ServerPage]
    receiver: ReceiverFacts | None = None


class QuantileInterval(ClosedModel):
    """Where a quantile lies, from a histogram: inside its bucket (low, high]; high null when
    the bucket is the one above the last finite bound."""

    low: float | None
    high: float | None


class HistogramView(ClosedModel):
    """One server measure as its histogram allows: an exact mean, quantiles as intervals."""

    count: int
    mean_s: float | None = Field(description="sum / count: exact")
    p50_s: QuantileInterval | None
    p99_s: QuantileInterval | None


class TtftGap(ClosedModel):
    """Client TTFT against server TTFT, over the same requests."""

    client_mean_s: float
    server_mean_s: float
    added_mean_s: float = Field(description="client mean - server mean: exact")
    client_p50_s: float
    client_p99_s: float
    server_p50_s: QuantileInterval | None
    server_p99_s: QuantileInterval | None
    added_p50_s: QuantileInterval | None = Field(
        description="the client's exact p50 minus the server p50's interval (a difference of "
        "quantiles, not the quantile of per-request differences: spans give that)"
    )
    added_p99_s: QuantileInterval | None
    gap_fraction: float = Field(description="added mean / client mean")
    grade: Grade


class EngineView(ClosedModel):
    """One engine's side of the run."""

    name: str
    role: Literal["prefill", "decode", "mixed"] | None
    read: bool = Field(description="both readings succeeded and the engine did not restart")
    completed: int | None = Field(
        description="requests the engine finished (vllm:request_success_total, finished_reason "
        "stop or length)"
    )
    aborted: int | None = Field(description="finished_reason abort (and error where shown)")
    share: float | None = Field(
        description="its part of the fleet's serving completions (decode and mixed engines)"
    )
    ttft: HistogramView | None
    queue: HistogramView | None
    prefill: HistogramView | None
    decode: HistogramView | None
    e2e: HistogramView | None
    client_added_ttft_s: float | None = Field(
        default=None,
        description="with spans: the median client-added TTFT of the requests it served",
    )


class FleetView(ClosedModel):
    """The fleet's side of the run against the client's."""

    client_completed: int
    server_completed: int | None = Field(
        description="the serving engines' (decode and mixed) completions; null when a page is "
        "missing"
    )
    prefill_completed: int | None = Field(
        description="the prefill engines' completions (split requests' first halves); null "
        "without prefill engines"
    )
    ttft_method: str | None = Field(
        description="how the server TTFT is composed: 'engines' (their TTFT histograms merged), "
        "or 'prefill e2e + serving ttft' for split fleets (exact for the mean; quantiles then "
        "come from spans only)"
    )
    ttft: TtftGap | None


class SpanView(ClosedModel):
    """Per-request spans joined to the client's records by request id."""

    client_completed: int
    matched: int = Field(description="completed client records that have their server span")
    client_only: int = Field(description="completed records without a span")
    client_only_ids: list[str] = Field(description="the first 20 of them")
    server_only: int = Field(description="spans with no client record of this run (warm-up apart)")
    server_only_ids: list[str]
    warmup_spans: int
    added_ttft_s: dict[str, float | int | None] = Field(
        description="client TTFT - server TTFT per matched request: count, mean, max, p50, p90, "
        "p95, p99, and min"
    )
    negative: int = Field(description="matched requests whose client TTFT is below the server's")
    by_engine: dict[str, int] = Field(description="matched requests per serving engine")


class ServerView(ClosedModel):
    """``summary.json``'s ``server``: the client's records against the server's."""

    pages: int = Field(description="pages read (engines and router)")
    missing_pages: list[str] = Field(description="pages that could not be read, by name")
    fleet: FleetView
    engines: list[EngineView]
    warnings: list[str] = Field(description="count mismatches and pages not read, one line each")
    spans: SpanView | None = None


class ServerTiming(ClosedModel):
    """``requests.jsonl``'s ``server``: the engine's own timings of one request (from spans)."""

    engine: str | None = Field(description="the engine that streamed it (null: not known)")
    prefill_engine: str | None = Field(description="the prefill engine of a split request")
    ttft_s: float = Field(description="the server's TTFT (a split request: prefill e2e + ttft)")
    queue_s: float | None
    prefill_s: float | None
    decode_s: float | None
    e2e_s: float | None
    client_added_ttft_s: float = Field(description="the record's ttft_s - the server's")
    spans: int = Field(description="spans matched to the request")
