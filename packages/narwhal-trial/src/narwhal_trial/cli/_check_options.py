"""``check``'s and ``reconcile``'s options, declared once as dataclass fields (``_declare``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from narwhal_trial.cli._common_options import ApiKeyEnvOpt, MaxModelLenOpt


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckOptions:
    """What ``check`` checks: the workload against the fleet, its profiles and launch records."""

    workload: Annotated[Path, typer.Option("--workload", help="workload.json from prepare.")]
    fleet: Annotated[Path, typer.Option("--fleet", help="narwhal.fleet file of the targets.")]
    profiles: Annotated[Path, typer.Option("--profiles", help="Accepted profile store.")]
    launch_record: Annotated[
        list[Path] | None,
        typer.Option("--launch-record", help="File holding a `vllm serve` command (repeat)."),
    ] = None
    engine: Annotated[
        list[str] | None,
        typer.Option("--engine", help="Check only this engine iid (repeat; default: all)."),
    ] = None
    api_key_env: ApiKeyEnvOpt = None
    max_model_len: MaxModelLenOpt = None
    probe: Annotated[
        Path | None,
        typer.Option(
            "--probe",
            help="A narwhal.probe document (narwhal-profile --verify): fail an engine that "
            "drifted past its threshold or is not in it, and a probe of another store.",
        ),
    ] = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ReconcileOptions:
    """The two files ``reconcile`` matches, and how it prints."""

    requests: Annotated[Path, typer.Option("--requests", help="A run's requests.jsonl.")]
    journal: Annotated[Path, typer.Option("--journal", help="The router's journal (JSON lines).")]
    json_out: Annotated[
        bool, typer.Option("--json", help="Print the report as one JSON object.")
    ] = False
