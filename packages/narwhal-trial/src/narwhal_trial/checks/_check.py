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
   profiler warns at); its figures are shown (``_profile_domain``, shared with ``predict``).
3. Prefix caching is off on each engine according to its own ``vllm:cache_config_info``
   (``enable_prefix_caching``), and in each launch record given as a file (the ``vllm serve``
   command line must hold ``--no-enable-prefix-caching`` and no later ``--enable-prefix-caching``;
   ``_launch``). The runbook has the operator retain launch records, so giving none is a failing
   item; one that cannot be read is a blocking error (ReadError), as an unreadable fleet is.
4. A fleet entry whose URL is a frontend that is not ours (NVIDIA Dynamo's: its workers serve no
   HTTP) is checked through it: the context limit may come from its
   ``dynamo_frontend_model_context_length`` gauge; its page has no ``vllm:cache_config_info``, so
   the prefix-caching item passes there with the launch records deciding (item 3); and its
   published scheduler settings (``max_num_seqs``, ``max_num_batched_tokens``) must equal those
   the engine's accepted profile was measured under, where both are known (``_frontend``).
5. With ``--probe`` (a ``narwhal.probe`` document, ``narwhal-profile --verify``; no engine is
   contacted for these items): each target engine is in the probe and did not drift past its
   threshold, and the probe compared the very store given as ``--profiles`` (its SHA-256). A
   probe that cannot be read is a blocking error (TrialUsageError), as an unreadable fleet is.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

from narwhal_engine_client import EngineClient, EngineClientError, MetricsSnapshot
from narwhal_store import (
    EngineDrift,
    LoadedFleet,
    LoadedStore,
    ProbeDocument,
    Profile,
    StoreError,
    load_fleet,
    load_probe,
    read_store,
)
from narwhal_trial._access import ApiKeyEnv
from narwhal_trial._errors import TrialError, TrialUsageError
from narwhal_trial.documents._frontend import (
    describe,
    frontend_scheduler,
    is_dynamo_page,
    profile_differences,
)
from narwhal_trial.predictor._profile_domain import CheckItem, accepted_profile, domain_items
from narwhal_trial.server._launch import LaunchRecord, prefix_caching_off, read_launch_records
from narwhal_trial.workload._file import Workload, load_workload
from narwhal_trial.workload._prepare import live_max_model_len

_FALSE = {"false", "0", "no", "off"}


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


def frontend_items(
    iid: str, snapshot: MetricsSnapshot, url: str, model: str, profile: Profile | None
) -> list[CheckItem]:
    """The items of a Dynamo frontend's page: prefix caching (the launch records decide) and its
    published scheduler settings against the profile's."""
    items = [
        CheckItem(
            iid,
            "prefix caching off (metrics)",
            True,
            "a Dynamo frontend's page has no vllm:cache_config_info: the launch records decide",
        )
    ]
    published = frontend_scheduler(snapshot, model, url)
    if published is None:
        return items
    differs = profile_differences(published, profile)
    detail = describe(published) + (
        "; differs from the profile: " + "; ".join(differs)
        if differs
        else (", as in the profile" if profile is not None and profile.scheduler else "")
    )
    items.append(CheckItem(iid, "scheduler settings (frontend)", not differs, detail))
    return items


def _drift_figures(drift: EngineDrift) -> list[tuple[str, str, bool]]:
    """Each probed phase: its name, ``1.21x the profile (5-95 % 1.18-1.24)``, and whether it
    drifted."""
    return [
        (name, f"{d.factor:.2f}x the profile (5-95 % {d.low:.2f}-{d.high:.2f})", d.drifted)
        for name, d in (("prefill", drift.prefill), ("decode", drift.decode))
        if d is not None
    ]


def probe_items(
    probe: ProbeDocument, probe_path: Path, store: LoadedStore, targets: Sequence[str]
) -> list[CheckItem]:
    """One ``engine speed (probe)`` item per target (in the probe and not drifted past its
    threshold) and one ``probe of this store`` item (the probe compared this store)."""
    what = "engine speed (probe)"
    threshold = f"the {probe.threshold * 100:g} % threshold"
    items: list[CheckItem] = []
    for iid in targets:
        drift = probe.engines.get(iid)
        if drift is None:
            probed = ", ".join(probe.engines)
            detail = f"not in the probe {probe_path} (it probed {probed}): probe it"
            items.append(CheckItem(iid, what, False, detail))
            continue
        figures = _drift_figures(drift)
        past = [f"{name} {text}" for name, text, drifted in figures if drifted]
        if past:
            detail = (
                f"{'; '.join(past)}, past {threshold} (probe of {probe.created_at}): the engine "
                "runs at another speed than its profile; re-profile it or find what changed"
            )
        else:
            shown = "; ".join(f"{name} {text}" for name, text, _ in figures)
            detail = f"{shown}, within {threshold} (probe of {probe.created_at})"
        items.append(CheckItem(iid, what, not past, detail))
    same = probe.profiles_sha256 == store.sha256
    detail = (
        f"the probe {probe_path} compared {probe.profiles} (SHA-256 {probe.profiles_sha256[:12]})"
        + (
            ", this store"
            if same
            else f", not {store.path} (SHA-256 {store.sha256[:12]}): probe this store"
        )
    )
    items.append(CheckItem(str(probe_path), "probe of this store", same, detail))
    return items


async def _engine_items(
    fleet: LoadedFleet,
    iid: str,
    workload: Workload,
    keys: ApiKeyEnv,
    given_limit: int | None,
    profile: Profile | None = None,
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
            snapshot = await client.metrics()
        except EngineClientError as exc:
            items.append(CheckItem(iid, "prefix caching off (metrics)", False, _message(exc, keys)))
            return items
        if is_dynamo_page(snapshot):
            url = f"{client.base_url}/metrics"
            return items + frontend_items(iid, snapshot, url, workload.model, profile)
        labels = snapshot.cache_config()
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
    probe_path: Path | None = None,
) -> list[CheckItem]:
    """Every pre-trial check. Raises (before any engine is contacted) WorkloadError, ReadError (a
    launch record) or TrialUsageError (the fleet, the store or the probe, an unknown
    ``--engine``) when an input cannot be used at all: those are blocking errors, not failed
    checks.

    ``keys``: the key for engines whose fleet entry names no ``api_key_env`` (default: the
    ``NARWHAL_API_KEY`` variable when set); ``max_model_len``: ``--max-model-len``;
    ``probe_path``: ``--probe``, a freshness probe whose items are checked too.
    """
    keys = keys or ApiKeyEnv.choose(None)
    workload = load_workload(workload_path).workload
    try:
        fleet = load_fleet(fleet_path)
        store = read_store(store_path)
        probe = None if probe_path is None else load_probe(probe_path)
    except StoreError as exc:
        raise TrialUsageError(str(exc)) from exc
    records = read_launch_records(launch_records)
    known = [e.iid for e in fleet.config.engines]
    unknown = [iid for iid in engines if iid not in known]
    if unknown:
        raise TrialUsageError(f"--engine {', '.join(unknown)} not in the fleet {fleet_path}")
    targets = list(engines) or known
    items: list[CheckItem] = []
    profiles: dict[str, Profile] = {}
    for iid in targets:
        found = accepted_profile(store, fleet, iid)
        if isinstance(found, str):
            items.append(CheckItem(iid, "accepted profile", False, found))
        else:
            profiles[iid] = found
            role = fleet.config.engine(iid).role
            items.extend(profile_items(iid, role, found, workload))

    async def live() -> list[list[CheckItem]]:
        return list(
            await asyncio.gather(
                *(
                    _engine_items(fleet, i, workload, keys, max_model_len, profiles.get(i))
                    for i in targets
                )
            )
        )

    for engine_items in asyncio.run(live()):
        items.extend(engine_items)
    if probe is not None and probe_path is not None:
        items.extend(probe_items(probe, probe_path, store, targets))
    items.extend(launch_record_items(records))
    return items
