"""The profile store (``narwhal.profiles``, docs/design.md §7): keys, bindings, fits, the store."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Annotated, Any, Literal, Self

from pydantic import ConfigDict, Field, StringConstraints, model_validator

from narwhal_store._fields import (
    Generator,
    Iid,
    LocatedValueError,
    Mode,
    PosFloat,
    PosInt,
    Role,
    Sha256,
    StrictModel,
    Timestamp,
)
from narwhal_store._forms import (
    DECODE_COEFFICIENTS,
    DECODE_FORM,
    MIXING_COEFFICIENTS,
    MIXING_FORM,
    PREFILL_COEFFICIENTS,
    PREFILL_FORM,
    tpot_batch_context_s,
    ttft_quadratic_s,
)
from narwhal_store._scheduler import SchedulerSettings

__all__ = [
    "DECODE_FORM",
    "PREFILL_FORM",
    "Binding",
    "Colocation",
    "DecodeFitDoc",
    "EngineFacts",
    "FitDoc",
    "MixingFitDoc",
    "PrefillFitDoc",
    "Profile",
    "ProfileKey",
    "ProfileStore",
    "SamplesRef",
    "check_unique_keys",
]

_FORM_COEFFICIENTS = {
    PREFILL_FORM: PREFILL_COEFFICIENTS,
    DECODE_FORM: DECODE_COEFFICIENTS,
    MIXING_FORM: MIXING_COEFFICIENTS,
}
_SUMMARY_NUMBERS = ("mean_rel_error", "worst_rel_error")


class ProfileKey(StrictModel):
    """What a profile is measured for: (engine iid, gpu group, role split, target role)."""

    engine: Iid
    gpu_group: Annotated[str, StringConstraints(min_length=1)] | None
    role_split: Annotated[dict[Role, PosInt], Field(min_length=1)]
    target_role: Role

    @model_validator(mode="after")
    def _target_in_split(self) -> Self:
        if self.target_role not in self.role_split:
            raise LocatedValueError(
                "target_role",
                f"{self.target_role!r} does not occur in role_split {self.role_split}",
            )
        return self

    def ident(self) -> tuple[str, str | None, tuple[tuple[str, int], ...], str]:
        """A hashable identity: equal idents mean the same profile variant."""
        split = tuple(sorted(self.role_split.items()))
        return (self.engine, self.gpu_group, split, self.target_role)

    def label(self) -> str:
        """Human-readable form for messages: ``h200-0.prefill (group h200-0, decode=1+prefill=1,
        target prefill)``."""
        split = "+".join(f"{role}={n}" for role, n in sorted(self.role_split.items()))
        group = "no group" if self.gpu_group is None else f"group {self.gpu_group}"
        return f"{self.engine} ({group}, {split}, target {self.target_role})"


def check_unique_keys(keys: Sequence[ProfileKey]) -> None:
    """Refuse a second ``profiles[i]`` with the key of an earlier one (store and sidecar alike)."""
    first: dict[object, int] = {}
    for index, key in enumerate(keys):
        ident = key.ident()
        if ident in first:
            raise LocatedValueError(
                f"profiles[{index}].key",
                f"duplicate profile key {key.label()} (first at profiles[{first[ident]}])",
            )
        first[ident] = index


class Binding(StrictModel):
    """What the profile is bound to (docs/design.md §6).

    ``sha256`` is the SHA-256 of the canonical JSON of the evidence document (the sidecar's
    ``evidence.before``, which ``evidence.after`` must equal); ``generation`` is the identity
    generation (for ``kind="identity"`` it equals ``sha256``).
    """

    kind: Literal["identity", "attestation"]
    generation: Sha256
    sha256: Sha256


class EngineFacts(StrictModel):
    """The live engine facts the profile was measured on."""

    url: str
    model: str
    root: str | None
    max_model_len: PosInt
    version: str


class FitDoc(StrictModel):
    """A fit as produced by narwhal-fit's ``to_dict()``: open but typed.

    ``form``, ``coefficients`` and ``domain`` are required; other keys (``residuals``,
    ``mean_rel_error``, ``worst_rel_error``, ``worst_point``, medians, points, ...) are kept as
    written. For the known forms the coefficients must be exactly ``a, b, c`` (prefill) or
    ``d0, d1, d2`` (decode), all ≥ 0.
    """

    model_config = ConfigDict(extra="allow")

    form: Annotated[str, StringConstraints(min_length=1)]
    coefficients: dict[str, float]
    domain: dict[str, Any]

    @model_validator(mode="after")
    def _check_known(self) -> Self:
        names = _FORM_COEFFICIENTS.get(self.form)
        if names is not None:
            if sorted(self.coefficients) != sorted(names):
                raise LocatedValueError(
                    "coefficients",
                    f"form {self.form} needs coefficients {', '.join(names)} "
                    f"(got {', '.join(sorted(self.coefficients)) or 'none'})",
                )
            for name, value in self.coefficients.items():
                if value < 0:
                    raise LocatedValueError(f"coefficients.{name}", f"must be >= 0 (got {value!r})")
        extras: dict[str, Any] = self.model_extra or {}
        for name in _SUMMARY_NUMBERS:
            number = extras.get(name)
            if number is None:
                continue
            if isinstance(number, bool) or not isinstance(number, int | float):
                raise LocatedValueError(name, f"must be a number (got {number!r})")
            if not math.isfinite(number) or number < 0:
                raise LocatedValueError(name, f"must be a finite number >= 0 (got {number!r})")
        return self

    def to_dict(self) -> dict[str, Any]:
        """The plain dict (what narwhal-fit's ``load_fit`` reads back)."""
        return self.model_dump(mode="json")


class PrefillFitDoc(FitDoc):
    """The prefill fit: ``ttft_s(L) = a + b·L + c·L²`` for form ``ttft-quadratic-v1``."""

    def ttft_s(self, length: float) -> float:
        """Predicted TTFT in seconds at ``length`` prompt tokens (``ttft-quadratic-v1`` only)."""
        if self.form != PREFILL_FORM:
            raise ValueError(f"ttft_s() knows form {PREFILL_FORM}, not {self.form}")
        return ttft_quadratic_s(self.coefficients, length)


class DecodeFitDoc(FitDoc):
    """The decode fit: ``tpot_s(n, ctx) = d0 + d1·n + d2·n·ctx`` (``tpot-batch-context-v1``)."""

    def tpot_s(self, concurrency: float, ctx: float) -> float:
        """Predicted TPOT in seconds (form ``tpot-batch-context-v1`` only)."""
        if self.form != DECODE_FORM:
            raise ValueError(f"tpot_s() knows form {DECODE_FORM}, not {self.form}")
        return tpot_batch_context_s(self.coefficients, concurrency, ctx)


class MixingFitDoc(FitDoc):
    """The mixing fit (``mixing-share-step-v1``, from the opt-in mixing points): the decode time
    one prefill costs the running streams, ``share·(b·L + c·L²) + step_s·chunks``."""


class Colocation(StrictModel):
    """Neighbour traffic applied while the profile was measured (``--colocated``)."""

    prefill_rps: PosFloat
    decode_rps: PosFloat
    prefill_tokens: PosInt
    decode_input_tokens: PosInt
    decode_output_tokens: PosInt


class Profile(StrictModel):
    """One measured profile. ``samples_sha256`` is the SHA-256 of the canonical JSON of this key's
    entry in the sidecar (:func:`write_store` fills it in)."""

    key: ProfileKey
    binding: Binding
    engine: EngineFacts
    prefill_fit: PrefillFitDoc
    decode_fit: DecodeFitDoc | None
    colocation: Colocation | None
    samples_sha256: Sha256
    scheduler: SchedulerSettings | None = None
    """The engine's scheduler settings and their sources (None: written before they were kept)."""
    mixing_fit: MixingFitDoc | None = None
    """How the engine mixes prefill and decode, when the sweep measured it (``--mixing``)."""


class SamplesRef(StrictModel):
    """The sidecar: its file name (beside the store) and SHA-256 of its bytes."""

    path: Annotated[str, StringConstraints(min_length=1, pattern=r"^[^/\\]+$")]
    sha256: Sha256


class ProfileStore(StrictModel):
    """``{"format": "narwhal.profiles", "format_version": 1 | 2, ...}``: one profile per key.
    Version 2 is the first that may hold a ``mixing_fit``; a store without one is written as 1."""

    format: Literal["narwhal.profiles"]
    format_version: Literal[1, 2]
    generator: Generator
    created_at: Timestamp
    mode: Mode
    fleet_sha256: Sha256
    samples: SamplesRef
    profiles: list[Profile]

    @model_validator(mode="after")
    def _unique_keys(self) -> Self:
        check_unique_keys([p.key for p in self.profiles])
        if self.format_version == 1:
            for index, profile in enumerate(self.profiles):
                if profile.mixing_fit is not None:
                    raise LocatedValueError(
                        f"profiles.{index}.mixing_fit", "a mixing fit needs format_version 2"
                    )
        return self

    def find(self, engine: str) -> list[Profile]:
        """Every profile of engine ``engine`` (one per role split it was measured under)."""
        return [p for p in self.profiles if p.key.engine == engine]
