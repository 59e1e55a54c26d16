"""The base model and the field types shared by every narwhal file format."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints

__all__ = [
    "IID_PATTERN",
    "PENDING_SHA256",
    "ClosedModel",
    "Generator",
    "Iid",
    "LocatedValueError",
    "Mode",
    "NonNegFloat",
    "NonNegInt",
    "PosFloat",
    "PosInt",
    "Role",
    "SecretValueError",
    "Sha256",
    "StrictModel",
    "Timestamp",
]

IID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"

#: Placeholder for the digests :func:`write_store` computes (``samples.sha256``,
#: ``samples_sha256``).
PENDING_SHA256 = "0" * 64

Role = Literal["prefill", "decode", "mixed"]
Mode = Literal["live", "refit", "merge"]
Iid = Annotated[str, StringConstraints(pattern=IID_PATTERN)]
Sha256 = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
PosInt = Annotated[int, Field(ge=1)]
NonNegInt = Annotated[int, Field(ge=0)]
PosFloat = Annotated[float, Field(gt=0)]
NonNegFloat = Annotated[float, Field(ge=0)]


class LocatedValueError(ValueError):
    """A validation failure that knows its JSON path (relative to the validated model)."""

    def __init__(self, json_path: str, message: str) -> None:
        super().__init__(f"{json_path}: {message}")
        self.json_path = json_path
        self.message = message


class SecretValueError(ValueError):
    """A validation failure whose input must not be echoed in messages (it may hold a secret)."""


def _check_timestamp(value: str) -> str:
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError as exc:
        raise ValueError(f"not an ISO 8601 timestamp: {value!r}") from exc
    if parsed.tzinfo is None:
        raise ValueError(f"timestamp {value!r} has no UTC offset")
    return value


#: ISO 8601 wall-clock time with a UTC offset, kept as written.
Timestamp = Annotated[str, AfterValidator(_check_timestamp)]


class ClosedModel(BaseModel):
    """Base of every narwhal file format: unknown keys are errors. Values are validated in
    pydantic's default (lax) mode; :class:`StrictModel` narrows that for the store's formats."""

    model_config = ConfigDict(extra="forbid")


class StrictModel(ClosedModel):
    """Strict base: unknown keys are errors, no type coercion (ints are accepted as floats),
    NaN and infinities refused."""

    model_config = ConfigDict(strict=True, allow_inf_nan=False, frozen=False)


class Generator(StrictModel):
    """The program that wrote a document."""

    name: Annotated[str, StringConstraints(min_length=1)]
    version: Annotated[str, StringConstraints(min_length=1)]
