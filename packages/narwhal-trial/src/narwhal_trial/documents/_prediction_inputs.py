"""The ``predict`` document's inputs: the files and settings used, each engine's scheduler
settings, and the ``--calibrate`` correction (re-exported by ``_prediction``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from narwhal_trial.documents._prediction_schedule import PredictedWorkload, omitted_when_none
from narwhal_trial.documents._records import AliasedDoc


class EngineSettings(AliasedDoc):
    """One engine's scheduler settings and prefill/decode mixing as the prediction used them."""

    max_num_batched_tokens: int
    max_num_batched_tokens_source: str = Field(
        description="--max-num-batched-tokens, --limits, profile (from the engine or the limits "
        "file it was measured with), or default"
    )
    chunked_prefill: bool
    chunked_prefill_source: str
    max_num_seqs: int | None = Field(description="null: no cap on running sequences")
    max_num_seqs_source: str
    mixing: Literal["measured", "assumed"] = Field(
        description="measured: the profile's mixing fit; assumed: vLLM's chunked prefill (one "
        "shared step, the prefill chunks' whole cost on the decodes), when the profile has no "
        "mixing fit or its mean error is over 50 % (the detail then says so)"
    )
    mixing_share: float = Field(description="of the prefill chunks' cost on a mixed step")
    mixing_step_s: float = Field(description="added to a step holding decodes and chunks")
    mixing_detail: str = Field(description="which model and why, in words")


class CalibrationDoc(AliasedDoc):
    """``--calibrate RUN``: the run against the prediction at its rate, and the correction."""

    run: str = Field(description="the run folder")
    rate: float
    requests: int
    input_tokens: int
    output_tokens: int
    measured_ttft_p50_s: float = Field(description="median TTFT of the run's completed requests")
    measured_tpot_p50_s: float
    predicted_ttft_p50_s: float = Field(description="the profiles' prediction at the run's rate")
    predicted_tpot_p50_s: float
    prefill_factor: float = Field(
        description="on every engine's prefill fit, so the predicted median TTFT at the run's "
        "rate equals the measured one (with decode_factor)"
    )
    decode_factor: float = Field(description="on every engine's decode fit and mixing step")
    applied: bool = Field(
        description="true: this prediction uses the corrected fits (--apply-calibration); "
        "false: reported only, the prediction is the profiles' own"
    )


class ProbeFactor(AliasedDoc):
    """One phase's drift as a freshness probe measured it: the engine today over its profile."""

    factor: float = Field(description="the median of the probe's factors (1: as profiled)")
    low: float = Field(description="5 % of the median's bootstrap")
    high: float = Field(description="95 % of the median's bootstrap")
    repeats: int


class ProbeUse(AliasedDoc):
    """``--calibrate PROBE``: the freshness probe each engine's speed was drawn from."""

    probe: str = Field(description="the probe document (narwhal.probe)")
    created_at: str = Field(description="when the probe ended")
    threshold: float = Field(description="the probe's drift threshold")
    weight: float = Field(
        1.0,
        ge=0.0,
        le=1.0,
        description="the power each factor was raised to (1: taken whole, as before it was kept)",
    )
    unseen_prefill_sd: float = Field(
        0.0, ge=0.0, description="relative spread of the prefill speed the probe did not see"
    )
    unseen_decode_sd: float = Field(
        0.0, ge=0.0, description="relative spread of the decode speed the probe did not see"
    )
    prefill: dict[str, ProbeFactor | None] = Field(
        description="per engine: its prefill speed (null: not probed, the sweep's own speed)"
    )
    decode: dict[str, ProbeFactor | None] = Field(
        description="per engine: its decode speed (null: not probed, the sweep's own speed)"
    )
    drifted: list[str] = Field(description="engines past the probe's threshold")


class Inputs(AliasedDoc):
    """The files and settings the prediction used."""

    fleet: str
    fleet_sha256: str
    profiles: str
    profiles_sha256: str
    limits: str | None
    input_tokens: int
    output_tokens: int
    requests: int
    max_in_flight: int
    ttft_s: str
    tpot_s: str
    attainment: str
    kv_transfer_s_per_token: float
    max_num_batched_tokens: int | None = Field(
        description="--max-num-batched-tokens (every engine); null: each engine's own (engines)"
    )
    replications: int
    seed: int
    spread: dict[str, str] = Field(description="per engine: the sidecar timings behind its spread")
    engines: dict[str, EngineSettings] = Field(
        description="per engine: the scheduler settings and the mixing model used, with sources"
    )
    frontend: str | None = Field(
        default=None,
        description="--frontend: the frontend whose published scheduler settings rank between "
        "--limits and the profiles",
    )
    frontend_differences: list[str] = Field(
        default_factory=list,
        description="where the frontend's published settings differ from the profiles' (the "
        "profiles were measured under other settings)",
    )
    workload: PredictedWorkload | None = omitted_when_none(
        "--workload: the file the shape came from (absent without it); a scheduled one's "
        "input_tokens and output_tokens above are its longest request's"
    )
