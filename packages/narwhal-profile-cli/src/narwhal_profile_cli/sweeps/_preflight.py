"""Preflight (docs/design.md §4): every selected engine is checked before any engine is measured.

Health is HTTP 200; ``/v1/models`` and ``/tokenize`` agree on a positive ``max_model_len``; the
evidence can be read (and, with ``engine_contract``, holds); the scheduler settings the engine
shows agree with the limits file's (§13); the sweep points that survive the engine's
``max_model_len`` and limits meet the reference's minimums.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from narwhal_engine_client import (
    EngineClient,
    EngineClientError,
    EngineProtocolError,
    SchedulerConfig,
    TokenCounting,
    select_model,
    token_counting,
)
from narwhal_profile_cli._bounds import (
    MIN_DECODE_CONCURRENCY,
    MIN_DECODE_INPUT_LENS,
    MIN_PREFILL_LENS,
)
from narwhal_profile_cli._errors import ProfileAbortError
from narwhal_profile_cli._options import SweepOptions
from narwhal_profile_cli.sweeps._evidence import read_evidence
from narwhal_profile_cli.sweeps._prompts import MIN_POOL, POOL_TEXT, token_pool
from narwhal_profile_cli.sweeps._scheduler import scheduler_settings
from narwhal_store import EngineEntry, EngineLimits, SchedulerSettings


@dataclass(frozen=True, slots=True)
class EngineProbe:
    """What a healthy engine told us: served model, live ``max_model_len``, the token pool, and
    its version with the per-chunk token counting it supports (``return_token_ids`` from vLLM
    0.10.2, per-chunk usage before; both when ``/version`` gives nothing readable)."""

    iid: str
    client: EngineClient
    model: str
    max_model_len: int
    pool: tuple[int, ...]
    version: str | None
    counting: TokenCounting


@dataclass(frozen=True, slots=True)
class SweepPoints:
    """The points kept for one engine, and the limit applied to its concurrencies."""

    prefill_lens: tuple[int, ...]
    decode_input_lens: tuple[int, ...]
    decode_concurrency: tuple[int, ...]
    limit: int | None


@dataclass(frozen=True, slots=True)
class EnginePlan:
    """One engine ready to be measured, with the scheduler settings its profile records."""

    entry: EngineEntry
    probe: EngineProbe
    points: SweepPoints
    contract: dict[str, Any] | None
    scheduler: SchedulerSettings

    @property
    def evidence_kind(self) -> Literal["identity", "attestation"]:
        """What the profile is bound to: the live identity, or (with a contract) an attestation."""
        return "identity" if self.contract is None else "attestation"


def kept_points(sweep: SweepOptions, max_model_len: int, limit: int | None) -> SweepPoints:
    """Apply the live ``max_model_len`` and the ``max_num_seqs`` limit to the candidate points.

    Prefill keeps ``L + 1 <= max_model_len`` (one output token); decode keeps input lengths with
    ``L + decode_tokens <= max_model_len``; with a limit, concurrencies above it are dropped and the
    limit itself is added as a point (the reference's rule).
    """
    prefill = tuple(n for n in sweep.prefill_lens if n + 1 <= max_model_len)
    inputs = tuple(n for n in sweep.decode_input_lens if n + sweep.decode_tokens <= max_model_len)
    concurrency = sweep.decode_concurrency
    if limit is not None:
        kept = {n for n in concurrency if n <= limit}
        if any(n > limit for n in concurrency):
            kept.add(limit)
        concurrency = tuple(sorted(kept))
    return SweepPoints(prefill, inputs, concurrency, limit)


def check_points(iid: str, sweep: SweepOptions, points: SweepPoints, max_model_len: int) -> None:
    """Abort when the engine's limits leave fewer points than the reference's minimums."""
    problems: list[str] = []
    if len(points.prefill_lens) < MIN_PREFILL_LENS:
        problems.append(
            f"{len(points.prefill_lens)} prefill length(s) {list(points.prefill_lens)} fit "
            f"max_model_len {max_model_len} (of {list(sweep.prefill_lens)}; "
            f"at least {MIN_PREFILL_LENS} are required)"
        )
    if len(points.decode_input_lens) < MIN_DECODE_INPUT_LENS:
        problems.append(
            f"{len(points.decode_input_lens)} decode input length(s) "
            f"{list(points.decode_input_lens)} fit max_model_len {max_model_len} with "
            f"--decode-tokens {sweep.decode_tokens} (of {list(sweep.decode_input_lens)}; "
            f"at least {MIN_DECODE_INPUT_LENS} are required)"
        )
    if len(points.decode_concurrency) < MIN_DECODE_CONCURRENCY:
        problems.append(
            f"{len(points.decode_concurrency)} decode concurrency level(s) "
            f"{list(points.decode_concurrency)} remain under max_num_seqs {points.limit} "
            f"(of {list(sweep.decode_concurrency)}; at least {MIN_DECODE_CONCURRENCY} are required)"
        )
    if problems:
        raise ProfileAbortError(
            f"engine {iid}: engine limits leave too few sweep points: " + "; ".join(problems),
            engine=iid,
            code="too_few_points",
        )


async def check_health(iid: str, client: EngineClient) -> None:
    """Abort unless ``/health`` answers HTTP 200."""
    try:
        status = await client.health()
    except EngineClientError as exc:
        raise ProfileAbortError(
            f"engine {iid}: /health failed its HTTP 200 check: {exc}", engine=iid, code="health"
        ) from exc
    if status != 200:
        raise ProfileAbortError(
            f"engine {iid}: /health failed its HTTP 200 check: answered HTTP {status}",
            engine=iid,
            code="health",
        )


async def probe_engine(entry: EngineEntry, client: EngineClient) -> EngineProbe:
    """Health, served model, ``max_model_len`` agreement and the token pool of one engine."""
    iid = entry.iid
    await check_health(iid, client)
    try:
        cards = await client.models()
    except EngineClientError as exc:
        raise ProfileAbortError(
            f"engine {iid}: GET /v1/models failed: {exc}", engine=iid, code="engine_error"
        ) from exc
    try:
        card = select_model(cards, entry.model, f"engine {iid}")
    except EngineClientError as exc:
        hint = "" if entry.model is not None else " in the fleet entry"
        raise ProfileAbortError(f"{exc}{hint}", engine=iid, code="model") from exc
    try:
        tokenized = await client.tokenize(POOL_TEXT, model=card.id, add_special_tokens=False)
    except EngineProtocolError as exc:
        raise ProfileAbortError(
            f"engine {iid}: the /tokenize response fails max_model_len validation: {exc}",
            engine=iid,
            code="max_model_len",
        ) from exc
    except EngineClientError as exc:
        raise ProfileAbortError(
            f"engine {iid}: POST /tokenize failed: {exc}", engine=iid, code="engine_error"
        ) from exc
    live = tokenized.max_model_len
    if card.max_model_len is not None and card.max_model_len != live:
        raise ProfileAbortError(
            f"engine {iid}: the /tokenize response fails max_model_len validation: /tokenize gives "
            f"{live} but /v1/models gives {card.max_model_len} for {card.id}",
            engine=iid,
            code="max_model_len",
        )
    pool = token_pool(tokenized.tokens)
    if len(pool) < MIN_POOL:
        raise ProfileAbortError(
            f"engine {iid}: /tokenize of the pool text gave {len(pool)} distinct token ids "
            f"(at least {MIN_POOL} are needed for fresh prompts)",
            engine=iid,
            code="engine_error",
        )
    version = await _version(client)
    return EngineProbe(iid, client, card.id, live, pool, version, token_counting(version))


async def _version(client: EngineClient) -> str | None:
    """``GET /version``, or None when the engine (or a router in front of it) does not tell."""
    try:
        return await client.version()
    except EngineClientError:
        return None


async def read_scheduler(client: EngineClient) -> SchedulerConfig | None:
    """The scheduler settings the engine shows (``/server_info``, development mode only), or None
    when it shows none or the request fails (the settings are then the limits file's, or
    unknown)."""
    try:
        return await client.scheduler_config()
    except EngineClientError:
        return None


async def preflight(
    entry: EngineEntry,
    client: EngineClient,
    sweep: SweepOptions,
    limits: EngineLimits | None = None,
    limits_path: Path | None = None,
) -> EnginePlan:
    """Everything checked before measuring: probe, evidence (contract), the scheduler settings
    (what the engine shows, else ``limits``, the engine's entry of the limits file at
    ``limits_path``) and the points surviving ``max_model_len`` and ``limits.max_num_seqs``."""
    probe = await probe_engine(entry, client)
    contract = None if entry.engine_contract is None else entry.engine_contract.expected()
    await read_evidence(entry.iid, client, probe.model, contract)
    shown = await read_scheduler(client)
    scheduler = scheduler_settings(entry.iid, shown, limits, limits_path)
    limit = None if limits is None else limits.max_num_seqs
    points = kept_points(sweep, probe.max_model_len, limit)
    check_points(entry.iid, sweep, points, probe.max_model_len)
    return EnginePlan(entry, probe, points, contract, scheduler)
