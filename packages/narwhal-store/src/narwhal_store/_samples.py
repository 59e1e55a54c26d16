"""The sample sidecar (``narwhal.samples``, docs/design.md §7): evidence, settings, raw timings."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Self

from pydantic import Field, StringConstraints, model_validator

from narwhal_store._fields import (
    Generator,
    Iid,
    LocatedValueError,
    Mode,
    NonNegFloat,
    NonNegInt,
    PosFloat,
    PosInt,
    Role,
    Sha256,
    StrictModel,
    Timestamp,
)
from narwhal_store._profiles import DecodeFitDoc, ProfileKey, check_unique_keys

__all__ = [
    "AppliedLimits",
    "DecodeSample",
    "DecodeStream",
    "Evidence",
    "InjectedPrefill",
    "MixingSample",
    "NeighbourRecord",
    "PrefillSample",
    "ProfileSamples",
    "Remeasured",
    "SamplesSidecar",
    "Source",
    "SweepSettings",
]


class Evidence(StrictModel):
    """The evidence documents read before and after the engine's sweep (identity or attestation)."""

    before: dict[str, Any]
    after: dict[str, Any]


class AppliedLimits(StrictModel):
    """The limits-file entry applied to this engine's decode cohorts."""

    max_num_seqs: PosInt


class SweepSettings(StrictModel):
    """The sweep settings actually used (after the engine's limits were applied)."""

    prefill_lens: Annotated[list[PosInt], Field(min_length=1)]
    decode_input_lens: list[PosInt]
    decode_concurrency: list[PosInt]
    decode_tokens: PosInt
    prefill_repeats: PosInt
    decode_repeats: PosInt
    limits_applied: AppliedLimits | None
    prompt_seed: int
    parallel_groups: PosInt | None = None
    """``--parallel-groups`` of the live sweep (None in sidecars written before it existed)."""
    shard: Annotated[str, StringConstraints(pattern=r"^[1-9][0-9]*/[1-9][0-9]*$")] | None = None
    """``--shard K/M`` of the live sweep that measured this profile, or None."""


class Remeasured(StrictModel):
    """A measurement taken again: its first attempt failed for a transport reason (the connection,
    not the engine), so it was measured once more on new connections."""

    request_ids: Annotated[list[str], Field(min_length=1)]
    """The first attempt's requests (none of their timings is kept)."""
    reason: Annotated[str, StringConstraints(min_length=1)]


class PrefillSample(StrictModel):
    """Every raw TTFT measured at one prompt length, with the request ids that produced them."""

    length: PosInt
    ttft_s: Annotated[list[NonNegFloat], Field(min_length=1)]
    request_ids: list[str]
    resent_request_ids: list[str] = Field(
        default_factory=list,
        description="requests first written on a kept-alive connection that the engine closed "
        "before answering, so sent once more on a new connection (their TTFT is the resend's)",
    )
    remeasured: list[Remeasured] = Field(
        default_factory=list,
        description="repeats whose first attempt failed for a transport reason and were measured "
        "again on new connections",
    )

    @model_validator(mode="after")
    def _same_length(self) -> Self:
        if len(self.request_ids) != len(self.ttft_s):
            raise LocatedValueError(
                "request_ids",
                f"{len(self.request_ids)} request id(s) for {len(self.ttft_s)} timing(s)",
            )
        return self


class DecodeStream(StrictModel):
    """One decode stream: send time and each content chunk's arrival time and token count."""

    request_id: str
    send_ns: int
    chunk_ns: list[int]
    chunk_tokens: list[NonNegInt]
    resends: NonNegInt = Field(
        default=0,
        description="1 when the request was first written on a kept-alive connection that the "
        "engine closed before answering, and so sent once more on a new connection",
    )

    @model_validator(mode="after")
    def _same_length(self) -> Self:
        if len(self.chunk_tokens) != len(self.chunk_ns):
            raise LocatedValueError(
                "chunk_tokens",
                f"{len(self.chunk_tokens)} token count(s) for {len(self.chunk_ns)} chunk time(s)",
            )
        return self


class DecodeSample(StrictModel):
    """One decode cohort: ``concurrency`` streams at ``input_len`` prompt tokens."""

    input_len: PosInt
    concurrency: PosInt
    repeat: NonNegInt
    valid: bool
    reason: str | None = None
    streams: list[DecodeStream]
    tpot_s: NonNegFloat | None = None
    ctx: NonNegFloat | None = None
    burst_share: Annotated[float, Field(ge=0, le=1)] | None = Field(
        default=None,
        description="share of the inter-chunk intervals inside the decode window that arrived in "
        "a burst (under a quarter of the stream's mean per-token interval for the chunk's "
        "tokens): the engine's API server flushing several steps at once; null when the cohort "
        "had no window or was written before this was recorded",
    )
    remeasured: Remeasured | None = Field(
        default=None,
        description="set when the cohort's first attempt failed for a transport reason and the "
        "cohort was measured again on new connections",
    )


class InjectedPrefill(StrictModel):
    """One prefill sent into a mixing point's decode streams (``max_tokens`` 1)."""

    request_id: str
    send_ns: int
    first_ns: int | None
    """Arrival of its token (None when it failed: the point is then invalid)."""


class MixingSample(StrictModel):
    """One mixing point (``--mixing``): ``concurrency`` streams of ``input_len`` prompt tokens
    decoding while ``len(prefills)`` prompts of ``prefill_len`` tokens arrive ``interval_s`` apart.

    ``loss_s`` is the decode time the streams lost per prefill: over the stretch of each stream
    that holds every prefill, the time taken minus its intervals at the stream's own quiet
    interval (measured outside that stretch), averaged over the streams and divided by the number
    of prefills; ``work_s`` the prefill fit's on-device time ``b·L + c·L²`` of one prefill and
    ``chunks`` the steps it spans under the engine's budget.
    """

    input_len: PosInt
    concurrency: PosInt
    prefill_len: PosInt
    interval_s: PosFloat
    repeat: NonNegInt
    valid: bool
    reason: str | None = None
    streams: list[DecodeStream]
    prefills: list[InjectedPrefill]
    loss_s: float | None = None
    work_s: NonNegFloat | None = None
    chunks: PosInt | None = None


class NeighbourRecord(StrictModel):
    """What one shared-GPU neighbour did during the target's interval."""

    iid: Iid
    role: Role
    offered_rps: PosFloat
    completions: NonNegInt
    achieved_rps: NonNegFloat
    errors: list[str]
    interval_s: NonNegFloat


class ProfileSamples(StrictModel):
    """Everything measured for one profile key."""

    key: ProfileKey
    evidence: Evidence
    settings: SweepSettings
    prefill_samples: list[PrefillSample]
    decode_samples: list[DecodeSample]
    neighbours: list[NeighbourRecord]
    decode_fit: DecodeFitDoc | None
    mixing_samples: list[MixingSample] = Field(default_factory=list)
    """The mixing points (``--mixing``; format_version 2 only)."""


class Source(StrictModel):
    """An input of a refit or merge: its path and the SHA-256 of its bytes."""

    path: Annotated[str, StringConstraints(min_length=1)]
    sha256: Sha256
    kind: Literal["store", "samples"]


class SamplesSidecar(StrictModel):
    """``{"format": "narwhal.samples", "format_version": 1 | 2, ...}``: one entry per profile key.
    Version 2 is the first that may hold mixing points; a sidecar without any is written as 1."""

    format: Literal["narwhal.samples"]
    format_version: Literal[1, 2]
    generator: Generator
    created_at: Timestamp
    mode: Mode
    fleet_sha256: Sha256
    profiles: list[ProfileSamples]
    sources: list[Source] = Field(default_factory=list)

    @model_validator(mode="after")
    def _unique_keys(self) -> Self:
        check_unique_keys([e.key for e in self.profiles])
        if self.format_version == 1:
            for index, entry in enumerate(self.profiles):
                if entry.mixing_samples:
                    raise LocatedValueError(
                        f"profiles.{index}.mixing_samples", "mixing points need format_version 2"
                    )
        return self

    def find(self, key: ProfileKey) -> ProfileSamples | None:
        """The entry for ``key``, or None."""
        ident = key.ident()
        return next((e for e in self.profiles if e.key.ident() == ident), None)
