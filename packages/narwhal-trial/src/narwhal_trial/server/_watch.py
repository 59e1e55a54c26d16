"""The run's watch on the server side: which pages to read, the two readings, ``server.json``.

``server_targets`` lists the pages: each engine of ``--fleet`` (its iid and role), each
``--engine-metrics`` URL, and the ``--base`` page. The base page is the router's, unless its URL
is an engine's; without a fleet or engine URLs it is read as an engine named ``base`` when it
serves vLLM's TTFT histogram (a trial straight against one engine) and as the router otherwise.

``ServerWatch.before`` reads every page just before the first offer; ``after`` reads them again
once the last stream has ended, and reads once more (for at most a second) while the serving
engines count fewer finished requests than the client completed, since an engine may update its
counters a moment after the stream's last byte. No reading ever fails the run.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from narwhal_engine_client import EngineClient
from narwhal_store import StoreError, load_fleet
from narwhal_trial._access import redact_url
from narwhal_trial._errors import TrialUsageError
from narwhal_trial.documents._server import ServerPage
from narwhal_trial.server._pages import (
    SUCCESS,
    TTFT,
    MetricsTarget,
    Reading,
    page_delta,
    read_pages,
)

SETTLE_S = 1.0
SETTLE_POLL_S = 0.2


def _norm(url: str) -> str:
    return url.rstrip("/")


def server_targets(
    base_url: str, fleet: Path | None, engine_urls: Sequence[str]
) -> list[MetricsTarget]:
    """The pages to read; TrialUsageError for a fleet file that cannot be used."""
    targets: list[MetricsTarget] = []
    if fleet is not None:
        try:
            loaded = load_fleet(fleet)
        except (StoreError, OSError) as exc:
            raise TrialUsageError(f"--fleet {fleet}: {exc}") from exc
        for e in loaded.config.engines:
            targets.append(MetricsTarget(e.iid, "engine", _norm(str(e.url)), e.role))
    for url in engine_urls:
        parts = urlsplit(url)
        name = f"{parts.hostname}:{parts.port}" if parts.port else str(parts.hostname)
        targets.append(MetricsTarget(name, "engine", _norm(url)))
    if all(t.base_url != _norm(base_url) for t in targets):
        alone = fleet is None and not engine_urls
        targets.append(MetricsTarget("base" if alone else "router", "router", _norm(base_url)))
    return targets


def _serving_done(readings: Sequence[Reading], targets: Sequence[MetricsTarget]) -> float:
    """Requests the serving engines have finished (stop or length), over their pages."""
    total = 0.0
    for t, r in zip(targets, readings, strict=True):
        if t.kind != "engine" or t.role == "prefill" or r.snapshot is None:
            continue
        for family in r.snapshot.families.values():
            total += sum(
                s.value
                for s in family.samples
                if s.name == SUCCESS and s.labels.get("finished_reason") in ("stop", "length")
            )
    return total


@dataclass(slots=True)
class ServerWatch:
    """The readings of one run."""

    targets: list[MetricsTarget]
    first: list[Reading] = field(default_factory=list)
    last: list[Reading] = field(default_factory=list)

    async def before(self, base: EngineClient | None) -> None:
        """The readings just before the first offer."""
        self.first = await read_pages(self.targets, base)
        self._classify()

    def _classify(self) -> None:
        """The lone ``base`` page is an engine when it serves vLLM's TTFT histogram."""
        for i, (t, r) in enumerate(zip(self.targets, self.first, strict=True)):
            if t.name == "base" and r.snapshot is not None and TTFT in r.snapshot.families:
                self.targets[i] = MetricsTarget(t.name, "engine", t.base_url, t.role)

    async def after(self, base: EngineClient | None, completed: int) -> None:
        """The readings after the last stream; again while the engines lag the client's count."""
        start = time.monotonic()
        self.last = await read_pages(self.targets, base)
        while (
            any(t.kind == "engine" for t in self.targets)
            and all(r.reading.ok for r in self.last)
            and _serving_done(self.last, self.targets) - _serving_done(self.first, self.targets)
            < completed
            and time.monotonic() - start < SETTLE_S
        ):
            await asyncio.sleep(SETTLE_POLL_S)
            self.last = await read_pages(self.targets, base)

    def roles(self) -> dict[str, str | None]:
        """Each engine page's role, by name (the names spans carry as their engine)."""
        return {t.name: t.role for t in self.targets if t.kind == "engine"}

    def pages(self) -> list[ServerPage]:
        """Each target's deltas (empty before both readings happened)."""
        if not self.first or not self.last:
            return []
        return [
            page_delta(t, b, a, redact_url(f"{t.base_url}/metrics"))
            for t, b, a in zip(self.targets, self.first, self.last, strict=True)
        ]
