"""The fleet config (``narwhal.fleet``, docs/design.md §3): loader, role splits, profile keys."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal, Self
from urllib.parse import urlsplit

from pydantic import AfterValidator, Field, StringConstraints, model_validator

from narwhal_store._errors import StoreError
from narwhal_store._fields import (
    Iid,
    LocatedValueError,
    NonNegFloat,
    PosInt,
    Role,
    SecretValueError,
    StrictModel,
)
from narwhal_store._loading import load_model
from narwhal_store._profiles import ProfileKey

__all__ = [
    "EngineContract",
    "EngineEntry",
    "FleetConfig",
    "LoadedFleet",
    "ProfilesSection",
    "SharedDevice",
    "fleet_config",
    "load_fleet",
    "profile_key",
    "role_split",
]

NonEmpty = Annotated[str, StringConstraints(min_length=1)]
EnvName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]


def _check_url(value: str) -> str:
    parts = urlsplit(value)
    # Checked first and never echoed: user info or a query may hold a credential.
    if "@" in parts.netloc:
        raise SecretValueError(
            "credentials in URLs are not allowed; name a variable in api_key_env"
        )
    if parts.query or parts.fragment:
        raise SecretValueError("URL must not have a query or fragment")
    # The error report appends "(got ...)" itself: the messages do not repeat the value.
    if parts.scheme not in ("http", "https"):
        raise ValueError("URL must start with http:// or https://")
    if not parts.hostname:
        raise ValueError("URL has no host")
    try:
        _ = parts.port
    except ValueError as exc:
        raise ValueError("URL has an invalid port") from exc
    return value


HttpUrlText = Annotated[str, AfterValidator(_check_url)]


class ProfilesSection(StrictModel):
    """Where live sweeps write the store; a relative path resolves against the fleet's folder."""

    path: NonEmpty


class SharedDevice(StrictModel):
    """Engines with the same group share one GPU."""

    group: NonEmpty


class EngineContract(StrictModel):
    """Expected live facts (docs/design.md §6); each key set is compared with the live value.

    ``model``, ``root``, ``max_model_len`` and ``version`` come from ``/v1/models`` and
    ``/version``; ``prefix_caching`` is compared with the ``enable_prefix_caching`` label of
    ``vllm:cache_config_info``, the other keys with the label of the same name. Unknown keys are
    errors.
    """

    model: NonEmpty | None = None
    root: NonEmpty | None = None
    max_model_len: PosInt | None = None
    version: NonEmpty | None = None
    prefix_caching: bool | None = None
    block_size: PosInt | None = None
    cache_dtype: NonEmpty | None = None
    num_gpu_blocks: PosInt | None = None
    gpu_memory_utilization: Annotated[NonNegFloat, Field(le=1)] | None = None

    def expected(self) -> dict[str, object]:
        """The keys actually set, as a plain dict (what engine attestation compares)."""
        return self.model_dump(exclude_none=True)


class EngineEntry(StrictModel):
    """One engine of the fleet."""

    iid: Iid
    url: HttpUrlText
    role: Role
    model: NonEmpty | None = None
    shared_device: SharedDevice | None = None
    engine_contract: EngineContract | None = None
    api_key_env: EnvName | None = None

    @property
    def gpu_group(self) -> str | None:
        """The shared-device group, or None."""
        return None if self.shared_device is None else self.shared_device.group


class FleetConfig(StrictModel):
    """``{"format": "narwhal.fleet", "format_version": 1, "profiles": {...}, "engines": [...]}``."""

    format: Literal["narwhal.fleet"]
    format_version: Literal[1]
    profiles: ProfilesSection
    engines: Annotated[list[EngineEntry], Field(min_length=1)]

    @model_validator(mode="after")
    def _unique_iids(self) -> Self:
        first: dict[str, int] = {}
        for index, engine in enumerate(self.engines):
            if engine.iid in first:
                raise LocatedValueError(
                    f"engines[{index}].iid",
                    f"duplicate iid {engine.iid!r} (first at engines[{first[engine.iid]}])",
                )
            first[engine.iid] = index
        return self

    def engine(self, iid: str) -> EngineEntry:
        """The engine with this iid; ``StoreError`` when the fleet has none."""
        for entry in self.engines:
            if entry.iid == iid:
                return entry
        raise StoreError(f"engine {iid!r} is not in the fleet")

    def iids(self) -> list[str]:
        """Every engine iid, in file order."""
        return [entry.iid for entry in self.engines]


@dataclass(frozen=True, slots=True)
class LoadedFleet:
    """A validated fleet file with its provenance."""

    config: FleetConfig
    path: Path
    sha256: str
    base_dir: Path
    profiles_path: Path


def load_fleet(path: str | Path) -> LoadedFleet:
    """Read and validate a fleet file; ``FormatError`` names the file and the JSON path."""
    fleet_path = Path(path)
    config, digest = load_model(fleet_path, FleetConfig)
    base_dir = fleet_path.parent
    profiles = Path(config.profiles.path)
    profiles_path = profiles if profiles.is_absolute() else base_dir / profiles
    return LoadedFleet(config, fleet_path, digest, base_dir, profiles_path)


def fleet_config(fleet: FleetConfig | LoadedFleet) -> FleetConfig:
    """The fleet config, given either the config or the loaded fleet file."""
    return fleet.config if isinstance(fleet, LoadedFleet) else fleet


def role_split(fleet: FleetConfig | LoadedFleet, iid: str) -> dict[str, int]:
    """Count of each role among the engine's shared-device group; no group: its own role alone."""
    config = fleet_config(fleet)
    entry = config.engine(iid)
    group = entry.gpu_group
    if group is None:
        return {entry.role: 1}
    counts = Counter(e.role for e in config.engines if e.gpu_group == group)
    return dict(sorted(counts.items()))


def profile_key(fleet: FleetConfig | LoadedFleet, iid: str) -> ProfileKey:
    """The profile key (engine, gpu group, role split, target role) of a fleet engine."""
    entry = fleet_config(fleet).engine(iid)
    return ProfileKey.model_validate(
        {
            "engine": entry.iid,
            "gpu_group": entry.gpu_group,
            "role_split": role_split(fleet, iid),
            "target_role": entry.role,
        }
    )
