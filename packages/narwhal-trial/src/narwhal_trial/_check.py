"""``check``: the runbook's pre-trial checks, every failing item listed.

1. The workload's input + output tokens fit every target engine's live ``max_model_len``
   (``/tokenize``, checked against ``/v1/models`` and ``--max-model-len``), and every target engine
   serves its model. An engine's key comes from its fleet ``api_key_env``, else ``--api-key-env``.
2. They lie inside the accepted profile domain of the store: the profile whose key matches the
   engine's current fleet key exists; prefill targets (``prefill``/``mixed``) have
   ``input_tokens`` within the prefill fit's ``[min_len, max_len]``; decode targets
   (``decode``/``mixed``) have ``input_tokens`` within the decode fit's ``input_lens`` range, or,
   without ``input_lens``, the mean decode context ``input + output/2`` within
   ``[ctx_min, ctx_max]``. A decode target's decode fit must also be within narwhal-store's
   ``DECODE_MEAN_BOUND`` mean and ``DECODE_WORST_BOUND`` worst-point relative error (the bounds the
   profiler warns at); its figures are shown.
3. Prefix caching is off on each engine according to its own ``vllm:cache_config_info``
   (``enable_prefix_caching``), and in each launch record given as a file (the ``vllm serve``
   command line must hold ``--no-enable-prefix-caching`` and no later ``--enable-prefix-caching``;
   ``_launch``). The runbook has the operator retain launch records, so giving none is a failing
   item; one that cannot be read is a blocking error (ReadError), as an unreadable fleet is.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from narwhal_engine_client import EngineClient, EngineClientError
from narwhal_store import (
    DECODE_MEAN_BOUND,
    DECODE_WORST_BOUND,
    DecodeFitDoc,
    FitQuality,
    LoadedFleet,
    LoadedStore,
    Profile,
    StoreError,
    decode_fit_suspect,
    load_fleet,
    profile_key,
    read_store,
)
from narwhal_trial._access import ApiKeyEnv
from narwhal_trial._errors import TrialError, TrialUsageError
from narwhal_trial._launch import LaunchRecord, prefix_caching_off, read_launch_records
from narwhal_trial._prepare import live_max_model_len
from narwhal_trial._workload import Workload, load_workload

_FALSE = {"false", "0", "no", "off"}


@dataclass(frozen=True, slots=True)
class CheckItem:
    """One check: what was checked, whether it passed, and the detail."""

    subject: str
    what: str
    ok: bool
    detail: str


def launch_record_item(record: LaunchRecord) -> CheckItem:
    """A launch record passes when its command line turns prefix caching off (last flag wins)."""
    ok, detail = prefix_caching_off(record)
    return CheckItem(str(record.path), "launch record: prefix caching off", ok, detail)


def launch_record_items(records: Sequence[LaunchRecord]) -> list[CheckItem]:
    """One item per launch record; a single failing item when none was given."""
    if not records:
        return [
            CheckItem(
                "launch records",
                "launch record: prefix caching off",
                False,
                "none given: pass each engine's `vllm serve` command file with --launch-record",
            )
        ]
    return [launch_record_item(record) for record in records]


def profile_items(iid: str, role: str, profile: Profile, workload: Workload) -> list[CheckItem]:
    """The profile-domain checks of one engine's accepted profile."""
    return domain_items(iid, role, profile, workload.input_tokens, workload.output_tokens)


def domain_items(iid: str, role: str, profile: Profile, n_in: int, n_out: int) -> list[CheckItem]:
    """The profile-domain checks of one engine's accepted profile for an ``n_in``/``n_out``
    shape (also what ``predict`` refuses to extrapolate beyond)."""
    items: list[CheckItem] = []
    if role in ("prefill", "mixed"):
        dom = profile.prefill_fit.domain
        lo, hi = dom.get("min_len"), dom.get("max_len")
        ok = isinstance(lo, int) and isinstance(hi, int) and lo <= n_in <= hi
        items.append(
            CheckItem(iid, "prefill domain", ok, f"input {n_in} tokens, profile [{lo}, {hi}]")
        )
    if role in ("decode", "mixed"):
        fit = profile.decode_fit
        if fit is None:
            items.append(CheckItem(iid, "decode domain", False, "the profile has no decode fit"))
            return items
        items.append(_decode_item(iid, fit.domain, n_in, n_out))
        items.append(_decode_quality_item(iid, fit))
    return items


def _decode_quality_item(iid: str, fit: DecodeFitDoc) -> CheckItem:
    """The decode fit must be within ``DECODE_MEAN_BOUND`` / ``DECODE_WORST_BOUND``, so that a fit
    the profiler warned about never silently feeds a trial."""
    what = "decode fit quality"
    quality = FitQuality.of(fit)
    if quality is None:
        return CheckItem(iid, what, False, "the decode fit records no relative errors")
    figures = (
        f"mean relative error {quality.mean_rel_error:.1%}, worst {quality.worst_rel_error:.1%} "
        f"at (concurrency, ctx) {list(quality.worst_point)}; bounds {DECODE_MEAN_BOUND:.0%} / "
        f"{DECODE_WORST_BOUND:.0%}"
    )
    why = decode_fit_suspect(quality)
    if why is not None:
        return CheckItem(iid, what, False, f"{figures}: {why}; re-profile this engine")
    return CheckItem(iid, what, True, figures)


def _decode_item(iid: str, dom: dict[str, Any], n_in: int, n_out: int) -> CheckItem:
    lens = dom.get("input_lens")
    if isinstance(lens, list) and lens:
        ok = min(lens) <= n_in <= max(lens)
        return CheckItem(
            iid, "decode domain", ok, f"input {n_in} tokens, profile input lengths {lens}"
        )
    lo, hi = dom.get("ctx_min"), dom.get("ctx_max")
    ctx = n_in + n_out / 2
    ok = isinstance(lo, int | float) and isinstance(hi, int | float) and lo <= ctx <= hi
    return CheckItem(iid, "decode domain", ok, f"mean context {ctx:g}, profile [{lo}, {hi}]")


def accepted_profile(store: LoadedStore, fleet: LoadedFleet, iid: str) -> Profile | str:
    """The store's profile for the engine's current fleet key, or why there is none."""
    key = profile_key(fleet, iid)
    found = [p for p in store.store.find(iid) if p.key.ident() == key.ident()]
    return found[0] if found else f"none for {key.label()}"


async def _engine_items(
    fleet: LoadedFleet, iid: str, workload: Workload, keys: ApiKeyEnv, given_limit: int | None
) -> list[CheckItem]:
    entry = fleet.config.engine(iid)
    items: list[CheckItem] = []
    need = workload.input_tokens + workload.output_tokens
    if entry.api_key_env is not None:  # the fleet's own variable for this engine wins
        keys = ApiKeyEnv(entry.api_key_env, given=True, is_set=True)
    try:
        client = EngineClient.from_env(entry.url, keys.sent_from, timeout_s=30.0)
    except EngineClientError as exc:
        return [CheckItem(iid, "engine reachable", False, str(exc))]
    async with client:
        try:
            cards = await client.models()
            card = next((c for c in cards if c.id == workload.model), None)
            if card is None:
                served = ", ".join(c.id for c in cards) or "none"
                items.append(
                    CheckItem(iid, "serves the model", False, f"{workload.model} not in {served}")
                )
            else:
                limit = await live_max_model_len(client, card, given_limit)
                items.append(
                    CheckItem(
                        iid, "context limit", need <= limit, f"{need} tokens, max_model_len {limit}"
                    )
                )
        except (EngineClientError, TrialError) as exc:
            items.append(CheckItem(iid, "context limit", False, _message(exc, keys)))
        try:
            labels = (await client.metrics()).cache_config()
        except EngineClientError as exc:
            items.append(CheckItem(iid, "prefix caching off (metrics)", False, _message(exc, keys)))
            return items
        value = None if labels is None else labels.get("enable_prefix_caching")
        ok = value is not None and value.strip().lower() in _FALSE
        detail = (
            "no vllm:cache_config_info enable_prefix_caching label"
            if value is None
            else f"enable_prefix_caching={value}"
        )
        items.append(CheckItem(iid, "prefix caching off (metrics)", ok, detail))
    return items


def _message(exc: Exception, keys: ApiKeyEnv) -> str:
    refused = keys.refusal(exc)
    if refused is not None:
        return refused
    return exc.message if isinstance(exc, TrialError) else str(exc)


def run_checks(
    *,
    workload_path: Path,
    fleet_path: Path,
    store_path: Path,
    launch_records: Sequence[Path],
    engines: Sequence[str] = (),
    keys: ApiKeyEnv | None = None,
    max_model_len: int | None = None,
) -> list[CheckItem]:
    """Every pre-trial check. Raises (before any engine is contacted) WorkloadError, ReadError (a
    launch record) or TrialUsageError (the fleet or the store, an unknown ``--engine``) when an
    input cannot be used at all: those are blocking errors, not failed checks.

    ``keys``: the key for engines whose fleet entry names no ``api_key_env`` (default: the
    ``NARWHAL_API_KEY`` variable when set); ``max_model_len``: ``--max-model-len``.
    """
    keys = keys or ApiKeyEnv.choose(None)
    workload = load_workload(workload_path).workload
    try:
        fleet = load_fleet(fleet_path)
        store = read_store(store_path)
    except StoreError as exc:
        raise TrialUsageError(str(exc)) from exc
    records = read_launch_records(launch_records)
    known = [e.iid for e in fleet.config.engines]
    unknown = [iid for iid in engines if iid not in known]
    if unknown:
        raise TrialUsageError(f"--engine {', '.join(unknown)} not in the fleet {fleet_path}")
    targets = list(engines) or known
    items: list[CheckItem] = []
    for iid in targets:
        found = accepted_profile(store, fleet, iid)
        if isinstance(found, str):
            items.append(CheckItem(iid, "accepted profile", False, found))
        else:
            role = fleet.config.engine(iid).role
            items.extend(profile_items(iid, role, found, workload))

    async def live() -> list[list[CheckItem]]:
        return list(
            await asyncio.gather(
                *(_engine_items(fleet, i, workload, keys, max_model_len) for i in targets)
            )
        )

    for engine_items in asyncio.run(live()):
        items.extend(engine_items)
    items.extend(launch_record_items(records))
    return items
