"""The session's shared state: folders, the venv's interpreter, the model, the results."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from narwhal_sim.testing import free_port

from ._server import VllmServer, running


@dataclass
class Conformance:
    """What every variant shares: folders, the venv's interpreter, the model, the results."""

    run_dir: Path
    python: Path
    model_dir: Path
    results: dict[str, Any] = field(default_factory=dict)

    def folder(self, variant: str) -> Path:
        """A private work folder for one variant's files."""
        path = self.run_dir / variant
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        return path

    def record(self, variant: str, **figures: Any) -> None:
        """Keep figures for ``results.json`` (written when the session ends)."""
        self.results.setdefault(variant, {}).update(figures)

    @contextmanager
    def server(
        self,
        variant: str,
        extra: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        secret_env: Mapping[str, str] | None = None,
    ) -> Iterator[VllmServer]:
        """Start a server of this variant, wait for /health, stop it afterwards."""
        log = self.folder(variant) / "server.log"
        with running(
            variant,
            self.python,
            self.model_dir,
            free_port(),
            log,
            extra=extra,
            env=env,
            secret_env=secret_env,
        ) as server:
            split = server.split.describe() if server.split else "not split (one CPU)"
            self.record(variant, server_start_s=round(server.ready_s or 0.0, 1), cpus=split)
            yield server
