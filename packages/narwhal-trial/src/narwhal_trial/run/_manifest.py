"""Building ``manifest.json``: the runbook's items plus run id, base URL, start, arguments."""

from __future__ import annotations

import platform
import socket
import sys

from narwhal_trial._provenance import (
    dist_version,
    helper_digest,
    helper_files,
    helper_packages,
    source_revision,
)
from narwhal_trial.documents._records import LaunchRecordCopy, Limits, Manifest
from narwhal_trial.run._settings import RunSettings
from narwhal_trial.workload._file import LoadedWorkload


def build_manifest(
    settings: RunSettings,
    loaded: LoadedWorkload,
    *,
    run_id: str,
    start_time: str,
    warmup_request_id: str,
    event_loop: str,
    launch_records: list[LaunchRecordCopy] | None = None,
) -> Manifest:
    """The manifest of a run about to start; ``launch_records``: the copies kept in its folder."""
    packages = helper_packages()
    files = helper_files(settings.launcher, packages)
    revision, dirty = source_revision()
    workload = loaded.workload
    return Manifest(
        run_id=run_id,
        base_url=settings.base_url,
        start_time=start_time,
        workload_path=loaded.path,
        workload_digest=loaded.sha256,
        helper_digest=helper_digest(files),
        helper_files=files,
        helper_version=dist_version("narwhal-trial"),
        packages={p.dist: p.version for p in packages},
        hostname=socket.gethostname(),
        source_revision=revision,
        source_dirty=dirty,
        command=list(settings.command) or list(sys.argv),
        python_version=f"{platform.python_implementation()} {platform.python_version()}",
        httpx_version=dist_version("httpx"),
        event_loop=event_loop,
        limits=Limits(
            max_in_flight=settings.max_in_flight,
            max_lag_s=settings.max_lag_s,
            request_timeout_s=settings.request_timeout_s,
            drain_timeout_s=settings.drain_timeout_s,
            drain_gauges=list(settings.drain[1]),
            stream_transport=settings.stream_transport,
            drain_preset=settings.drain[0],
            keepalive_expiry_s=settings.keepalive_expiry_s,
        ),
        arguments=settings.arguments(),
        model=workload.model,
        requests=settings.requests,
        rate=settings.rate,
        ttft_s=str(settings.ttft_s),
        tpot_s=str(settings.tpot_s),
        attainment=str(settings.attainment),
        input_tokens=workload.input_tokens,
        output_tokens=workload.output_tokens,
        warmup_request_id=warmup_request_id,
        workload_served_by=workload.served_by,
        api_key_env=settings.api_keys().sent_from,
        operator_max_model_len=settings.max_model_len,
        launch_records=launch_records or [],
    )
