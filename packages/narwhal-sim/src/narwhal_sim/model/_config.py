"""The ``narwhal.sim`` config, and each engine's settings from it and a validated fleet."""

from __future__ import annotations

import ipaddress
import os
import re
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson

from narwhal_sim._errors import SimConfigError
from narwhal_sim._faults import Faults
from narwhal_sim._http import KEEP_ALIVE_S
from narwhal_sim.model._presets import Preset, get_preset
from narwhal_sim.model._scheduler import SCHEDULER_MODES, SchedulerMode
from narwhal_store import (
    EngineEntry,
    FleetConfig,
    LoadedFleet,
    PathAccessError,
    creation_problem,
    lstat_or_none,
)

SIM_FORMAT = "narwhal.sim"
API_STYLES = ("0.11", "0.33")
COALESCE_MODES = ("merge", "burst")

# keys allowed in the sim config's "defaults" and per-engine tables
ENGINE_KEYS = frozenset(
    {
        "api_style",
        "preset",
        "max_model_len",
        "max_model_len_policy",
        "max_num_seqs",
        "max_num_batched_tokens",
        "scheduler",
        "kv_cache_tokens",
        "stream_interval",
        "coalesce_steps",
        "coalesce_mode",
        "enable_request_id_headers",
        "dev_mode",
        "prefix_caching",
        "version",
        "served_model_name",
        "model_root",
        "error_shape",
        "jitter",
        "block_size",
        "gpu_memory_utilization",
        "faults",
        "kv_transfer_s_per_token",
        "keep_alive_s",
        "otlp_traces_endpoint",
        "otlp_export_interval_s",
    }
)
KV_TRANSFER_S_PER_TOKEN = 2.5e-6
"""Default KV-transfer time per prompt token into a decode engine (Llama-3.1-8B BF16: 128 KiB a
token over ~50 GB/s RDMA, about 20 ms for 8k tokens)."""
_CONTRACT_KEYS = {
    "model": "served_model_name",
    "max_model_len": "max_model_len",
    "version": "version",
}


@dataclass(slots=True)
class EngineSettings:
    """Everything one simulated engine needs, resolved from fleet + sim config + preset."""

    iid: str
    host: str
    port: int
    role: str
    group: str
    served_model_name: str
    model_root: str
    preset: Preset
    api_style: str
    version: str
    max_model_len: int
    max_model_len_policy: (
        str  # "reject" (<= 0.31 style 400) or "clamp" (0.32+ silent max_tokens clamp)
    )
    max_num_seqs: int
    max_num_batched_tokens: int
    kv_cache_tokens: int
    block_size: int
    stream_interval: int
    enable_request_id_headers: bool
    prefix_caching: bool
    error_shape: str  # "nested" ({"error": {...}}, >= 0.10.1) or "flat" ({"object": "error", ...})
    gpu_memory_utilization: float
    api_key_env: str | None = None
    faults: Faults = field(default_factory=Faults)
    # An API server that falls behind (vLLM's RequestOutputCollector): outputs reach the client
    # only every ``coalesce_steps`` engine steps (first and last at once), merged into one chunk
    # ("merge") or written back to back as separate chunks in one write ("burst").
    coalesce_steps: int = 1
    coalesce_mode: str = "merge"
    # Disaggregated serving: seconds per prompt token a request handed over by a prefill engine
    # (``kv_transfer_params.do_remote_prefill``) waits for its KV before this engine schedules it.
    kv_transfer_s_per_token: float = KV_TRANSFER_S_PER_TOKEN
    # vLLM's VLLM_HTTP_TIMEOUT_KEEP_ALIVE: a connection idle this long is closed by the server.
    keep_alive_s: float = KEEP_ALIVE_S
    # How prefill and decode share steps: "shared" (chunked prefill, one step for both) or
    # "turns" (prefill steps and decode steps alternate); see narwhal_sim.model._scheduler.
    scheduler: SchedulerMode = "shared"
    # vLLM's VLLM_SERVER_DEV_MODE=1: the development routes, of which GET /server_info is served.
    dev_mode: bool = False
    # vLLM's --otlp-traces-endpoint (``{iid}`` already replaced): one span per finished request,
    # exported in batches every ``otlp_export_interval_s``; None exports nothing.
    otlp_traces_endpoint: str | None = None
    otlp_export_interval_s: float = 0.5

    @property
    def url(self) -> str:
        """Base URL the engine listens on."""
        return base_url(self.host, self.port)


def base_url(host: str, port: int) -> str:
    """``http://HOST:PORT`` (an IPv6 host in brackets)."""
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def load_json(path: Path, what: str) -> Any:
    """Parse a JSON file, naming it in the error."""
    try:
        return orjson.loads(path.read_bytes())
    except OSError as exc:
        raise SimConfigError(f"cannot read {what} {path}: {exc.strerror}") from exc
    except orjson.JSONDecodeError as exc:
        raise SimConfigError(f"{what} {path} is not valid JSON: {exc}") from exc


def check_journal(path: Path) -> Path:
    """Refuse (SimConfigError) a journal path that cannot be appended to: a folder, a symlink, one
    that cannot be looked at (a folder on its way that cannot be entered), or one whose nearest
    existing parent is not a writable folder. Nothing is created."""
    return check_file_destination(path, "--journal", append=True)


def check_file_destination(path: Path, flag: str, *, append: bool = False) -> Path:
    """Refuse (SimConfigError naming ``flag`` and ``path``) a file the simulator is to write that
    is a symlink or not a regular file, cannot be looked at, or cannot be created (its nearest
    existing parent is not a writable folder); one that exists must be writable (``append``) or
    sit in a writable folder (replaced atomically). Nothing is created."""
    try:
        info = lstat_or_none(path)
        problem = creation_problem(path) if info is None else None
    except PathAccessError as exc:
        raise SimConfigError(f"{flag} {path}: {exc.reason}") from exc
    if problem is not None:
        raise SimConfigError(f"{flag} {path}: {problem}")
    if info is not None:
        if stat.S_ISLNK(info.st_mode):
            raise SimConfigError(f"{flag} {path}: it is a symlink")
        if not stat.S_ISREG(info.st_mode):
            raise SimConfigError(f"{flag} {path}: it exists and is not a regular file")
        if append and not os.access(path, os.W_OK):
            raise SimConfigError(f"{flag} {path}: it is not writable")
        if not append and not os.access(path.parent, os.W_OK | os.X_OK):
            raise SimConfigError(f"{flag} {path}: its folder {path.parent} is not writable")
    return path


def split_hostport(text: str, what: str) -> tuple[str, int]:
    """``HOST:PORT`` (or ``[v6]:PORT``) into a pair."""
    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise SimConfigError(f"{what}: expected HOST:PORT, got {text!r}")
    return host, int(port)


def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and ``localhost``."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def parse_http_endpoint(url: str) -> tuple[str, int, str]:
    """``http://HOST:PORT/PATH`` as (host, port, path with its query); ValueError when it is not
    one (another scheme, no host, no port, credentials or a fragment). An empty path is
    OTLP/HTTP's ``/v1/traces``."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"expected http://HOST:PORT/PATH ({exc})") from exc
    if parts.scheme != "http" or not parts.hostname or port is None or not 0 < port < 65536:
        raise ValueError("expected http://HOST:PORT/PATH")
    if parts.username is not None or parts.password is not None or parts.fragment:
        raise ValueError("expected http://HOST:PORT/PATH without credentials or a fragment")
    path = parts.path or "/v1/traces"
    return parts.hostname, port, f"{path}?{parts.query}" if parts.query else path


def _version_style(version: str) -> str:
    try:
        minor = int(version.split(".")[1])
        major = int(version.split(".")[0])
    except (IndexError, ValueError):
        return "0.33"
    return "0.11" if (major, minor) < (0, 20) else "0.33"


def version_tuple(version: str) -> tuple[int, ...]:
    """The first three numbers of a version string, zero-padded (``"0.10"`` -> ``(0, 10, 0)``)."""
    parts = [int(p) for p in re.findall(r"\d+", version)[:3]]
    return tuple(parts + [0] * (3 - len(parts)))


def _positive(key: str, value: Any, iid: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise SimConfigError(
            f"sim config engines.{iid}.{key}: expected a positive integer, got {value!r}"
        )
    return value


def _engine_table(sim: Mapping[str, Any], iid: str) -> dict[str, Any]:
    defaults = dict(sim.get("defaults") or {})
    own = dict((sim.get("engines") or {}).get(iid) or {})
    faults = {**(defaults.pop("faults", None) or {}), **(own.pop("faults", None) or {})}
    merged = {**defaults, **own}
    merged["faults"] = faults
    return merged


def check_sim_config(sim: Any) -> dict[str, Any]:
    """Validate the top level of a ``narwhal.sim`` document (unknown keys are errors)."""
    if not isinstance(sim, dict):
        raise SimConfigError("sim config: expected a JSON object")
    if sim.get("format") != SIM_FORMAT or sim.get("format_version") != 1:
        raise SimConfigError(f'sim config: expected "format": "{SIM_FORMAT}", "format_version": 1')
    extra = set(sim) - {"format", "format_version", "defaults", "engines"}
    if extra:
        raise SimConfigError(f"sim config: unknown key(s) {', '.join(sorted(extra))}")
    tables = [("defaults", sim.get("defaults") or {})]
    engines = sim.get("engines") or {}
    if not isinstance(engines, dict):
        raise SimConfigError("sim config engines: expected an object keyed by iid")
    tables += [(f"engines.{k}", v) for k, v in engines.items()]
    for where, table in tables:
        if not isinstance(table, dict):
            raise SimConfigError(f"sim config {where}: expected an object")
        bad = set(table) - ENGINE_KEYS
        if bad:
            raise SimConfigError(f"sim config {where}: unknown key(s) {', '.join(sorted(bad))}")
    return sim


def resolve_engines(
    fleet: LoadedFleet | FleetConfig,
    sim: Mapping[str, Any] | None,
    *,
    preset: str | None = None,
    allow_non_loopback: bool = False,
) -> list[EngineSettings]:
    """Settings of every engine of a fleet ``narwhal_store.load_fleet`` validated: preset <
    engine_contract < sim defaults < sim engine. The simulator's own limits on top of the fleet
    format (http only, an explicit port, loopback unless allowed, one engine per address) are
    errors naming the fleet file (when given a ``LoadedFleet``) and the engine's JSON path.

    ``preset`` (the ``--preset`` option) overrides the sim defaults' preset, not an engine's own.
    """
    if isinstance(fleet, LoadedFleet):
        config, where = fleet.config, f"fleet {fleet.path}: "
    else:
        config, where = fleet, "fleet "
    sim = check_sim_config(sim) if sim is not None else {}
    stray = set(sim.get("engines") or {}) - set(config.iids())
    if stray:
        raise SimConfigError(
            f"sim config engines: iid(s) not in the fleet: {', '.join(sorted(stray))}"
        )
    out: list[EngineSettings] = []
    first: dict[tuple[str, int], int] = {}
    for i, entry in enumerate(config.engines):
        host, port = _address(entry, f"{where}engines[{i}].url", allow_non_loopback)
        settings = _resolve_one(entry, host, port, sim, preset, allow_non_loopback)
        if (host, port) in first:
            raise SimConfigError(
                f"{where}engines[{i}].url: {settings.url} is used twice "
                f"(first at engines[{first[host, port]}])"
            )
        first[host, port] = i
        out.append(settings)
    return out


def _address(entry: EngineEntry, where: str, allow_non_loopback: bool) -> tuple[str, int]:
    """The host and port the simulator serves ``entry`` on (the fleet format allows more)."""
    url = urlsplit(entry.url)
    if url.scheme != "http" or not url.hostname or not url.port:
        raise SimConfigError(
            f"{where}: the simulator serves http://HOST:PORT URLs, got {entry.url!r}"
        )
    if not allow_non_loopback and not is_loopback(url.hostname):
        raise SimConfigError(f"{where}: {url.hostname} is not loopback (use --allow-non-loopback)")
    return url.hostname, url.port


def _merged_table(
    entry: EngineEntry, sim: Mapping[str, Any], preset_name: str | None
) -> tuple[dict[str, Any], Any]:
    """One engine's settings as written, lowest first: its fleet entry's contract and model, the
    sim config's defaults and its own table, ``--preset`` (over the defaults, not over the
    engine's own); and its faults table, apart."""
    iid = entry.iid
    table: dict[str, Any] = {}
    if entry.engine_contract is not None:
        given = entry.engine_contract.model_dump(exclude_unset=True)  # a null as written
        table.update({_CONTRACT_KEYS[k]: v for k, v in given.items() if k in _CONTRACT_KEYS})
        if isinstance(given.get("prefix_caching"), bool):
            table["prefix_caching"] = given["prefix_caching"]
        if "block_size" in given:
            table["block_size"] = given["block_size"]
    if entry.model is not None:
        table["served_model_name"] = entry.model
    sim_table = _engine_table(sim, iid)
    faults_patch = sim_table.pop("faults")
    table.update(sim_table)
    own = (sim.get("engines") or {}).get(iid) or {}
    if preset_name and "preset" not in own:
        table["preset"] = preset_name
    return table, faults_patch


def _preset_of(table: Mapping[str, Any], iid: str) -> Preset:
    """The engine's preset, with its ``jitter`` when the table gives one."""
    try:
        preset = get_preset(table.get("preset"))
    except KeyError as exc:
        raise SimConfigError(f"sim config engines.{iid}.preset: {exc.args[0]}") from exc
    if "jitter" in table:
        preset = preset.with_overrides(jitter=_number("jitter", table["jitter"], iid))
    return preset


def _api_facts(table: Mapping[str, Any], iid: str) -> tuple[str, str, str, str]:
    """The vLLM version the engine stands for, its API style, its ``max_model_len`` policy and
    its error shape, each defaulted from the one before."""
    version = str(
        table.get("version") or ("0.11.0" if table.get("api_style") == "0.11" else "0.33.0")
    )
    api_style = str(table.get("api_style") or _version_style(version))
    if api_style not in API_STYLES:
        raise SimConfigError(
            f"sim config engines.{iid}.api_style: expected 0.11 or 0.33, got {api_style!r}"
        )
    policy = str(
        table.get("max_model_len_policy") or ("reject" if api_style == "0.11" else "clamp")
    )
    if policy not in ("reject", "clamp"):
        raise SimConfigError(
            f"sim config engines.{iid}.max_model_len_policy: expected reject or clamp"
        )
    flat = version_tuple(version) < (0, 10, 1)
    shape = str(table.get("error_shape") or ("flat" if flat else "nested"))
    if shape not in ("nested", "flat"):
        raise SimConfigError(f"sim config engines.{iid}.error_shape: expected nested or flat")
    return version, api_style, policy, shape


def _resolve_one(
    entry: EngineEntry,
    host: str,
    port: int,
    sim: Mapping[str, Any],
    preset_name: str | None,
    allow_non_loopback: bool = False,
) -> EngineSettings:
    iid = entry.iid
    table, faults_patch = _merged_table(entry, sim, preset_name)
    preset = _preset_of(table, iid)
    version, api_style, policy, shape = _api_facts(table, iid)
    kv = _positive("kv_cache_tokens", table.get("kv_cache_tokens", preset.kv_cache_tokens), iid)
    max_model_len = _positive(
        "max_model_len", table.get("max_model_len", min(preset.max_model_len, kv)), iid
    )
    served = str(table.get("served_model_name") or preset.model)
    try:
        faults = Faults().merged(faults_patch)
    except SimConfigError as exc:
        raise SimConfigError(f"sim config engines.{iid}.faults: {exc}") from exc
    return EngineSettings(
        iid=iid,
        host=host,
        port=port,
        role=entry.role,
        group=entry.gpu_group or f"solo:{iid}",
        served_model_name=served,
        model_root=str(table.get("model_root") or preset.model),
        preset=preset,
        api_style=api_style,
        version=version,
        max_model_len=max_model_len,
        max_model_len_policy=policy,
        max_num_seqs=_positive("max_num_seqs", table.get("max_num_seqs", preset.max_num_seqs), iid),
        max_num_batched_tokens=_positive(
            "max_num_batched_tokens",
            table.get("max_num_batched_tokens", preset.max_num_batched_tokens),
            iid,
        ),
        kv_cache_tokens=kv,
        block_size=_positive("block_size", table.get("block_size", preset.block_size), iid),
        stream_interval=_positive("stream_interval", table.get("stream_interval", 1), iid),
        enable_request_id_headers=bool(table.get("enable_request_id_headers", False)),
        prefix_caching=bool(table.get("prefix_caching", False)),
        error_shape=shape,
        gpu_memory_utilization=_number(
            "gpu_memory_utilization", table.get("gpu_memory_utilization", 0.9), iid
        ),
        api_key_env=entry.api_key_env,
        faults=faults,
        coalesce_steps=_positive("coalesce_steps", table.get("coalesce_steps", 1), iid),
        coalesce_mode=_coalesce_mode(table.get("coalesce_mode", "merge"), iid),
        kv_transfer_s_per_token=_number(
            "kv_transfer_s_per_token",
            table.get("kv_transfer_s_per_token", KV_TRANSFER_S_PER_TOKEN),
            iid,
        ),
        keep_alive_s=_number("keep_alive_s", table.get("keep_alive_s", KEEP_ALIVE_S), iid),
        scheduler=_scheduler_mode(table.get("scheduler", "shared"), iid),
        dev_mode=_flag("dev_mode", table.get("dev_mode", False), iid),
        otlp_traces_endpoint=_otlp_endpoint(
            table.get("otlp_traces_endpoint"), iid, allow_non_loopback
        ),
        otlp_export_interval_s=_number(
            "otlp_export_interval_s", table.get("otlp_export_interval_s", 0.5), iid
        ),
    )


#: Each numeric engine key's range: the test, and the words its error names it with.
_RANGES: dict[str, tuple[Callable[[float], bool], str]] = {
    "jitter": (lambda v: 0 <= v <= 10, "a relative sigma in [0, 10]"),
    "gpu_memory_utilization": (lambda v: 0 <= v <= 1, "a fraction in [0, 1]"),
    "kv_transfer_s_per_token": (lambda v: 0 <= v < 1, "seconds in [0, 1)"),
    "keep_alive_s": (lambda v: 0 < v <= 3600, "seconds in (0, 3600]"),
    "otlp_export_interval_s": (lambda v: 0 < v <= 60, "seconds in (0, 60]"),
}


def _number(key: str, value: Any, iid: str) -> float:
    """``value`` of numeric key ``key`` when it is a number in the key's range; anything else (a
    string, a boolean, NaN) is one line naming the key and the value, never a traceback."""
    within, what = _RANGES[key]
    if isinstance(value, bool) or not isinstance(value, int | float) or not within(value):
        raise SimConfigError(f"sim config engines.{iid}.{key}: expected {what}, got {value!r}")
    return float(value)


def _choice(key: str, value: Any, choices: tuple[str, ...], iid: str) -> str:
    """``value`` of key ``key`` when it is one of ``choices``; else one line naming the key, the
    engine, the choices and the value."""
    if not isinstance(value, str) or value not in choices:
        raise SimConfigError(
            f"sim config engines.{iid}.{key}: expected {' or '.join(choices)}, got {value!r}"
        )
    return value


def _coalesce_mode(value: Any, iid: str) -> str:
    return _choice("coalesce_mode", value, COALESCE_MODES, iid)


def _scheduler_mode(value: Any, iid: str) -> SchedulerMode:
    return "turns" if _choice("scheduler", value, SCHEDULER_MODES, iid) == "turns" else "shared"


def _flag(key: str, value: Any, iid: str) -> bool:
    """``value`` of on/off key ``key`` when it is a JSON boolean; anything else is one line naming
    the key and the value."""
    if not isinstance(value, bool):
        raise SimConfigError(
            f"sim config engines.{iid}.{key}: expected true or false, got {value!r}"
        )
    return value


def _otlp_endpoint(value: Any, iid: str, allow_non_loopback: bool) -> str | None:
    """The OTLP/HTTP traces URL of key ``otlp_traces_endpoint`` with ``{iid}`` replaced by the
    engine's iid (None: no export); anything but ``http://HOST:PORT/PATH`` on a loopback host
    (unless allowed, as the engines' own addresses) is one line naming the key and the value."""
    if value is None:
        return None
    where = f"sim config engines.{iid}.otlp_traces_endpoint"
    if not isinstance(value, str):
        raise SimConfigError(f"{where}: expected http://HOST:PORT/PATH, got {value!r}")
    url = value.replace("{iid}", iid)
    try:
        host, _, _ = parse_http_endpoint(url)
    except ValueError as exc:
        raise SimConfigError(f"{where}: {exc}, got {value!r}") from exc
    if not allow_non_loopback and not is_loopback(host):
        raise SimConfigError(
            f"{where}: {host} is not loopback (use --allow-non-loopback), got {value!r}"
        )
    return url
