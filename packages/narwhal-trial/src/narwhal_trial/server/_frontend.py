"""Reading what a frontend publishes (``_frontend``) from its ``/metrics``: for ``run``, ``prepare``
and ``predict --frontend`` (whose command layer reads it, so ``predict`` itself contacts nothing).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path

from narwhal_engine_client import EngineClient, EngineClientError
from narwhal_store import StoreError, load_fleet
from narwhal_trial._access import ApiKeyEnv, check_base_url
from narwhal_trial._errors import TrialUsageError
from narwhal_trial.documents._frontend import (
    GAUGES,
    FrontendScheduler,
    frontend_scheduler,
    models_published,
)


async def read_frontend_scheduler(client: EngineClient, model: str) -> FrontendScheduler | None:
    """``frontend_scheduler`` of ``client``'s ``/metrics``; None when the page cannot be read
    (a server without one, or one that refuses it: the settings are then simply not exposed)."""
    try:
        snapshot = await client.metrics(names=GAUGES)
    except EngineClientError:
        return None
    return frontend_scheduler(snapshot, model, f"{client.base_url}/metrics")


async def read_server_version(client: EngineClient) -> str | None:
    """``GET /version`` of ``client``'s server (vLLM's version); None when it answers none (a
    router that does not forward it, or NVIDIA Dynamo's frontend, which has no such route)."""
    try:
        return await client.version()
    except EngineClientError:
        return None


async def published_by_engine(
    client: EngineClient, engines: Mapping[str, str | None]
) -> dict[str, FrontendScheduler]:
    """``predict --frontend``: per engine iid, the settings the frontend publishes for the model
    it serves (``engines``: iid -> served model, None for the page's only model).
    EngineClientError when the page cannot be read; ValueError naming the model it lacks."""
    snapshot = await client.metrics(names=GAUGES)
    url = f"{client.base_url}/metrics"
    models = models_published(snapshot)
    out: dict[str, FrontendScheduler] = {}
    for iid, model in engines.items():
        name = model if model is not None else (models[0] if len(models) == 1 else None)
        found = None if name is None else frontend_scheduler(snapshot, name, url)
        if found is None:
            shown = ", ".join(models) or "none"
            raise ValueError(
                f"{url} publishes no scheduler settings for {iid}'s model "
                f"{model or '(the fleet names none)'} (dynamo_frontend_model_* gauges for: {shown})"
            )
        out[iid] = found
    return out


def read_published(
    url: str, fleet_path: Path, api_key_env: str | None = None
) -> dict[str, FrontendScheduler]:
    """``predict --frontend URL``: the settings ``url`` publishes for each engine of the fleet
    file; TrialUsageError naming ``--frontend`` when they cannot be read."""
    check_base_url(url)
    keys = ApiKeyEnv.choose(api_key_env)
    try:
        fleet = load_fleet(fleet_path)
    except StoreError as exc:
        raise TrialUsageError(str(exc)) from exc
    engines = {e.iid: e.model for e in fleet.config.engines}

    async def read() -> dict[str, FrontendScheduler]:
        async with EngineClient.from_env(url, keys.sent_from, timeout_s=30.0) as client:
            return await published_by_engine(client, engines)

    try:
        return asyncio.run(read())
    except EngineClientError as exc:
        raise TrialUsageError(f"--frontend {url}: {keys.refusal(exc) or exc}") from exc
    except ValueError as exc:
        raise TrialUsageError(f"--frontend {url}: {exc}") from exc
