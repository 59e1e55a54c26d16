"""narwhal_store: profile stores, sample sidecars, fleet and limits files.

Strict pydantic models for the five file formats (``narwhal.fleet``, ``narwhal.limits``,
``narwhal.profiles``, ``narwhal.samples``, ``narwhal.probe``), loaders whose errors name the file
and the JSON path, canonical JSON and SHA-256 provenance, crash-safe symlink-refusing writes of a
store with its sidecar (and of any single file), verified reads, merges and JSON Schemas. Depends
on pydantic and orjson only: the fit forms' names, formulas and trust bounds belong to the format
(``_forms``), so reading a store needs neither narwhal-fit nor numpy nor scipy.
"""

from narwhal_store._atomic import write_file_atomic
from narwhal_store._canonical import canonical_json, sha256_file, sha256_hex
from narwhal_store._documents import new_documents
from narwhal_store._errors import (
    DestinationError,
    FormatError,
    IntegrityError,
    MergeError,
    PathAccessError,
    StoreError,
)
from narwhal_store._fields import PENDING_SHA256, ClosedModel, Generator
from narwhal_store._fleet import (
    EngineContract,
    EngineEntry,
    FleetConfig,
    LoadedFleet,
    ProfilesSection,
    SharedDevice,
    load_fleet,
    profile_key,
    role_split,
)
from narwhal_store._limits import EngineLimits, LimitsFile, load_limits
from narwhal_store._look import creation_problem, lstat_or_none
from narwhal_store._merge import evidence_problem, merge_stores
from narwhal_store._paths import sidecar_path
from narwhal_store._probe import (
    PROBE_FORMAT,
    DriftFactor,
    EngineDrift,
    ProbeDocument,
    ProbePoint,
    load_probe,
)
from narwhal_store._profiles import (
    DECODE_FORM,
    PREFILL_FORM,
    Binding,
    Colocation,
    DecodeFitDoc,
    EngineFacts,
    FitDoc,
    MixingFitDoc,
    PrefillFitDoc,
    Profile,
    ProfileKey,
    ProfileStore,
    SamplesRef,
)
from narwhal_store._quality import (
    BURSTY_SHARE,
    DECODE_MEAN_BOUND,
    DECODE_WORST_BOUND,
    FitQuality,
    decode_fit_suspect,
)
from narwhal_store._read import LoadedStore, read_sidecar, read_store, samples_digest
from narwhal_store._samples import (
    AppliedLimits,
    DecodeSample,
    DecodeStream,
    Evidence,
    InjectedPrefill,
    MixingSample,
    NeighbourRecord,
    PrefillSample,
    ProfileSamples,
    Remeasured,
    SamplesSidecar,
    Source,
    SweepSettings,
)
from narwhal_store._scheduler import BoolSetting, IntSetting, SchedulerSettings, SettingSource
from narwhal_store._schemas import SchemaSet, json_schemas, write_schemas
from narwhal_store._write import WrittenStore, check_destination, finish_pending, write_store

__all__ = [
    "BURSTY_SHARE",
    "DECODE_FORM",
    "DECODE_MEAN_BOUND",
    "DECODE_WORST_BOUND",
    "PENDING_SHA256",
    "PREFILL_FORM",
    "PROBE_FORMAT",
    "AppliedLimits",
    "Binding",
    "BoolSetting",
    "ClosedModel",
    "Colocation",
    "DecodeFitDoc",
    "DecodeSample",
    "DecodeStream",
    "DestinationError",
    "DriftFactor",
    "EngineContract",
    "EngineDrift",
    "EngineEntry",
    "EngineFacts",
    "EngineLimits",
    "Evidence",
    "FitDoc",
    "FitQuality",
    "FleetConfig",
    "FormatError",
    "Generator",
    "InjectedPrefill",
    "IntSetting",
    "IntegrityError",
    "LimitsFile",
    "LoadedFleet",
    "LoadedStore",
    "MergeError",
    "MixingFitDoc",
    "MixingSample",
    "NeighbourRecord",
    "PathAccessError",
    "PrefillFitDoc",
    "PrefillSample",
    "ProbeDocument",
    "ProbePoint",
    "Profile",
    "ProfileKey",
    "ProfileSamples",
    "ProfileStore",
    "ProfilesSection",
    "Remeasured",
    "SamplesRef",
    "SamplesSidecar",
    "SchedulerSettings",
    "SchemaSet",
    "SettingSource",
    "SharedDevice",
    "Source",
    "StoreError",
    "SweepSettings",
    "WrittenStore",
    "canonical_json",
    "check_destination",
    "creation_problem",
    "decode_fit_suspect",
    "evidence_problem",
    "finish_pending",
    "json_schemas",
    "load_fleet",
    "load_limits",
    "load_probe",
    "lstat_or_none",
    "merge_stores",
    "new_documents",
    "profile_key",
    "read_sidecar",
    "read_store",
    "role_split",
    "samples_digest",
    "sha256_file",
    "sha256_hex",
    "sidecar_path",
    "write_file_atomic",
    "write_schemas",
    "write_store",
]
