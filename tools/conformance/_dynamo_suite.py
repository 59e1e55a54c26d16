"""Our trial commands against Dynamo's frontend (mocker behind it), run once for the module.

In order: ``prepare`` without ``--tokenizer`` (it must refuse: the frontend has no ``/tokenize``
and no logprobs), ``prepare`` with the model folder's tokenizer, ``/metrics`` read, ``run`` (20
requests at 2/s, draining on the frontend's own gauges), the gauges polled back to zero,
``/metrics`` read again, then ``check`` of a fleet whose engine is reached through the frontend,
with an empty profile store and no launch record. Every command's
outputs are kept for the assertions and for ``commands.log``; nothing here asserts.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from narwhal_engine_client import MetricsSnapshot
from narwhal_store import Generator, load_fleet, new_documents, write_store

from . import _commands as cmd
from ._dynamo import MAX_MODEL_LEN, MODEL_NAME, DynamoStack

INPUT_TOKENS = 64
OUTPUT_TOKENS = 16
SEED = 7
RATE = "2"
REQUESTS = 20
#: Bounds so loose that only a broken request misses them: the trial's verdict is not under test.
BOUNDS = ("--ttft", "120", "--tpot", "10", "--attainment", "1", "--max-lag", "5")
#: The frontend's drain gauges (``run --drain-preset dynamo``).
DRAIN_GAUGES = ("dynamo_frontend_queued_requests", "dynamo_frontend_inflight_requests")
#: Gauges that read 0 when no request is left anywhere in the frontend.
IDLE_GAUGES = (*DRAIN_GAUGES, "dynamo_frontend_active_requests")
REQUESTS_TOTAL = "dynamo_frontend_requests_total"
STARTED_TOTAL = "dynamo_frontend_requests_started_total"
OUTPUT_TOKENS_TOTAL = "dynamo_frontend_output_tokens_total"
#: What the mocker runs with (its defaults) and the frontend shows on /metrics.
MAX_NUM_SEQS = 256
MAX_NUM_BATCHED_TOKENS = 8192
SCHEDULER_GAUGES = {
    "max_num_seqs": "dynamo_frontend_model_max_num_seqs",
    "max_num_batched_tokens": "dynamo_frontend_model_max_num_batched_tokens",
}
#: Generous: polling stops as soon as the condition holds.
SETTLE_S = 120.0


@dataclass
class DynamoSuite:
    """Everything the commands produced against one frontend."""

    stack: DynamoStack
    root: Path
    prepare_bare: cmd.Done
    prepare: cmd.Done
    before: MetricsSnapshot
    run: cmd.Done
    after: MetricsSnapshot
    idle: dict[str, float | None]
    check: cmd.Done
    extra_done: list[cmd.Done] = field(default_factory=list)

    @property
    def bare_out(self) -> Path:
        """Where the refused prepare was told to write."""
        return self.root / "trial" / "workload-no-tokenizer"

    @property
    def workload(self) -> Path:
        """``prepare``'s workload file."""
        return self.root / "trial" / "workload" / "workload.json"

    @property
    def run_dir(self) -> Path:
        """``run``'s record folder."""
        return self.root / "trial" / "run"

    def workload_doc(self) -> dict[str, Any]:
        """The workload (fails naming prepare's outcome when there is none)."""
        assert self.workload.is_file(), f"no workload: prepare failed\n{self.prepare.brief()}"
        return cmd.read_json(self.workload)

    def run_file(self, name: str) -> Path:
        """A file of the run folder (fails naming run's outcome when missing)."""
        path = self.run_dir / name
        assert path.is_file(), f"no {name}: run failed\n{self.run.brief()}"
        return path

    def outputs(self) -> list[cmd.Done]:
        """Every command run against the frontend."""
        return [self.prepare_bare, self.prepare, self.run, self.check, *self.extra_done]


def counter(page: MetricsSnapshot, name: str, **labels: str) -> float:
    """A counter summed over the label sets that carry ``labels`` (0 when none does yet)."""
    return math.fsum(
        sample.value
        for family in page.families.values()
        for sample in family.samples
        if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items())
    )


def idle_reading(page: MetricsSnapshot) -> dict[str, float | None]:
    """The idle gauges on one page (None for one not on it)."""
    return {name: page.sum(name) for name in IDLE_GAUGES}


def settle(probe: Callable[[], bool], timeout_s: float = SETTLE_S) -> bool:
    """Poll ``probe`` every half second until it holds or the deadline passes."""
    deadline = time.monotonic() + timeout_s
    while not probe():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.5)
    return True


def settled_page(url: str, before: MetricsSnapshot | None = None) -> MetricsSnapshot:
    """Poll ``/metrics`` until every idle gauge reads 0 and (given ``before``) every request
    started since ``before`` is also counted as finished; the last page read (the deadline
    passing is left to the assertions on that page)."""
    pages = [cmd.metrics(url)]

    def settled() -> bool:
        page = pages[-1] = cmd.metrics(url)
        idle = all(v is not None and v == 0 for v in idle_reading(page).values())
        if before is None or not idle:
            return idle
        started = counter(page, STARTED_TOTAL) - counter(before, STARTED_TOTAL)
        return started == counter(page, REQUESTS_TOTAL) - counter(before, REQUESTS_TOTAL)

    settle(settled)
    return pages[-1]


def frontend_fleet(stack: DynamoStack, folder: Path) -> tuple[Path, Path]:
    """A fleet file whose one engine is reached through the frontend (Dynamo's workers serve no
    HTTP) and an accepted-profile store with no profile in it (none can be measured here)."""
    fleet = cmd.write_fleet(folder, stack.url, iid="mocker", model=MODEL_NAME)
    store_doc, sidecar = new_documents(
        mode="live",
        fleet_sha256=load_fleet(fleet).sha256,
        generator=Generator(name="narwhal-conformance", version="0"),
        profiles=[],
        samples=[],
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
    )
    store = folder / "profiles" / "fleet-profiles.json"
    store.parent.mkdir(mode=0o700, exist_ok=True)
    write_store(store, store_doc, sidecar, mode="fresh")
    return fleet, store


def run_dynamo_suite(
    stack: DynamoStack, root: Path, env: Mapping[str, str] | None = None
) -> DynamoSuite:
    """prepare (refused, then with the tokenizer), run, check; keep everything."""
    env = dict(env or {})
    base = ("--base", stack.url)
    shape = (
        "--input-tokens", str(INPUT_TOKENS), "--output-tokens", str(OUTPUT_TOKENS),
        "--seed", str(SEED),
    )  # fmt: skip
    limit = ("--max-model-len", str(MAX_MODEL_LEN))
    trial = root / "trial"
    trial.mkdir(mode=0o700, parents=True, exist_ok=True)
    bare = cmd.trial(
        "prepare", *base, *shape, *limit, "--out", trial / "workload-no-tokenizer", env=env
    )
    prepare = cmd.trial(
        "prepare", *base, *shape, "--out", trial / "workload",
        "--tokenizer", stack.model_dir, *limit, env=env,
    )  # fmt: skip
    before = settled_page(stack.url)
    run = cmd.trial(
        "run", *base, "--workload", trial / "workload" / "workload.json",
        "--rate", RATE, "--requests", str(REQUESTS), *BOUNDS,
        "--drain-preset", "dynamo", *limit, "--out", trial / "run", env=env,
    )  # fmt: skip
    after = settled_page(stack.url, before)
    fleet, store = frontend_fleet(stack, trial / "fleet")
    check = cmd.trial(
        "check", "--workload", trial / "workload" / "workload.json", "--fleet", fleet,
        "--profiles", store, *limit, env=env,
    )  # fmt: skip
    return DynamoSuite(
        stack=stack,
        root=root,
        prepare_bare=bare,
        prepare=prepare,
        before=before,
        run=run,
        after=after,
        idle=idle_reading(after),
        check=check,
    )


def write_transcript(suite: DynamoSuite) -> Path:
    """Every command's argv, exit code and outputs into ``commands.log``."""
    path = suite.root / "commands.log"
    text = "\n\n".join(done.brief(limit=1_000_000) for done in suite.outputs())
    path.write_text(text + "\n", encoding="utf-8")
    path.chmod(0o600)
    return path
