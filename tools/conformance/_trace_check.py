"""A short window of each sample trace, and a synthetic Poisson workload, on vLLM's server:
``prepare``, ``predict --workload``, ``run --speedup`` and ``narwhal-report``, with the protocol
truths of a scheduled workload.

What must hold on the real engine, whatever its speed: every request completes with exactly its
own prompt and output token counts (the engine's usage), requests due together are due at the
same instant, the schedule view accounts for every request, and the report draws its views.
``predict`` reads the same workload from this server's profile: the Poisson workload's lengths
lie inside the profiled domain (prompts of 128 to 512 tokens), so it is predicted; the samples'
do not (up to the served 4,096 tokens, or below 128), so each is refused naming the request
outside it, as an operator must see it before trusting a number.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import _commands as cmd
from ._suite import DRAIN_GAUGES, TRIAL_BOUNDS, Suite, trial_args

EXAMPLES = cmd.REPO / "examples" / "traces"
#: (name, prepare's arguments, speedup): each replay lasts a few seconds.
WINDOWS: tuple[tuple[str, tuple[str, ...], float], ...] = (
    ("mooncake", ("--trace", str(EXAMPLES / "mooncake.jsonl"), "--limit", "4"), 2.0),
    ("azure", ("--trace", str(EXAMPLES / "azure.csv"), "--limit", "5"), 4.0),
    ("burstgpt", ("--trace", str(EXAMPLES / "burstgpt.csv"), "--limit", "5"), 50.0),
    ("poisson", ("--arrivals", "poisson", "--rate", "1", "--requests", "6",
                 "--input-lengths", "uniform:128-512", "--output-tokens", "16"), 1.0),
)  # fmt: skip
OUTSIDE = "the workload's requests lie outside the accepted profile domain"


@dataclass
class TraceReplay:
    """One sample's commands and what they wrote."""

    name: str
    speedup: float
    folder: Path
    done: list[cmd.Done] = field(default_factory=list)
    predicted: cmd.Done | None = None

    @property
    def traced(self) -> bool:
        return self.name != "poisson"

    @property
    def workload(self) -> Path:
        return self.folder / "workload" / "workload.json"

    @property
    def run_dir(self) -> Path:
        return self.folder / "run"

    def schedule(self) -> dict[str, Any]:
        doc: dict[str, Any] = cmd.read_json(self.workload)["schedule"]
        return doc

    def figures(self) -> dict[str, object]:
        summary = cmd.read_json(self.run_dir / "summary.json")
        view = summary.get("schedule") or {}
        predicted = None
        if self.predicted is not None and self.predicted.returncode in (0, 2):
            predicted = json.loads(self.predicted.stdout)["prediction"]["attainment"]
        return {
            "predicted_attainment": predicted,
            "measured_attainment": summary["attainment"],
            "exits": [d.returncode for d in self.done],
            "requests": summary["requests"],
            "good": summary["good"],
            "max_lag_s": summary["max_lag_s"],
            "densest_second": view.get("densest_second"),
            "wall_s": round(sum(d.wall_s for d in self.done), 1),
        }


def replay_samples(suite: Suite) -> list[TraceReplay]:
    """Prepare, predict, replay and report each workload of ``WINDOWS`` on the suite's server."""
    gauges = [arg for gauge in DRAIN_GAUGES for arg in ("--drain-gauge", gauge)]
    server, env = suite.server, suite.env
    out = []
    for name, prepare_args, speedup in WINDOWS:
        replay = TraceReplay(name, speedup, suite.root / "traces" / name)
        replay.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        clip = ("--clip-to-model",) if replay.traced else ()
        replay.done.append(
            cmd.trial(
                "prepare", *trial_args(server), *prepare_args, *clip, "--seed", "11",
                "--out", replay.folder / "workload", env=env,
            )
        )  # fmt: skip
        if replay.done[-1].returncode != 0:
            out.append(replay)
            continue
        replay.predicted = cmd.trial(
            "predict", "--fleet", suite.fleet, "--profiles", suite.store,
            "--limits", suite.root / "profile-limits.json", "--workload", replay.workload,
            "--speedup", str(speedup), *TRIAL_BOUNDS[:6], "--json", env=env,
        )  # fmt: skip
        replay.done.append(
            cmd.trial(
                "run", *trial_args(server), "--workload", replay.workload,
                "--speedup", str(speedup), *TRIAL_BOUNDS, *gauges,
                "--out", replay.run_dir, env=env,
            )
        )  # fmt: skip
        if (replay.run_dir / "summary.json").is_file():
            replay.done.append(cmd.report(replay.run_dir, "--out", replay.folder / "report.html"))
        out.append(replay)
    return out


def check_prediction(replay: TraceReplay) -> None:
    """``predict --workload``: the Poisson workload predicted at its speedup over each of its
    requests; a sample refused in one line, naming a request outside the profiled domain."""
    done = replay.predicted
    assert done is not None, "\n".join(d.brief() for d in replay.done)
    if replay.traced:
        assert done.returncode == 1, done.brief()
        assert OUTSIDE in done.stderr and ": request " in done.stderr, done.brief()
        assert done.stderr.strip().count("\n") == 0, done.brief()
        return
    assert done.returncode in (0, 2), done.brief()
    doc = json.loads(done.stdout)
    assert (
        doc["inputs"]["workload"]["sha256"]
        == hashlib.sha256(replay.workload.read_bytes()).hexdigest()
    )
    assert doc["prediction"]["speedup"] == replay.speedup
    assert sum(b["requests"] for b in doc["prediction"]["buckets"]) == 6


def check_replay(replay: TraceReplay) -> None:
    """The protocol truths of one replay (assertions)."""
    brief = "\n".join(d.brief() for d in replay.done)
    assert [d.returncode for d in replay.done] == [0, 0, 0], brief
    sched = replay.schedule()
    records = sorted(cmd.read_jsonl(replay.run_dir / "requests.jsonl"), key=lambda r: r["sequence"])
    assert len(records) == len(sched["due_offsets_ns"]), brief
    for r in records:
        n = r["sequence"]
        assert r["status"] == "completed", r
        # the real engine's own usage: the exact prompt built, the exact output asked
        assert r["prompt_tokens"] == sched["input_tokens"][n], r
        assert r["completion_tokens"] == sched["output_tokens"][n], r
        assert abs(r["due_s"] - sched["due_offsets_ns"][n] / 1e9 / replay.speedup) < 1e-6, r
    for a, b in itertools.pairwise(records):
        if sched["due_offsets_ns"][a["sequence"]] == sched["due_offsets_ns"][b["sequence"]]:
            assert a["due_s"] == b["due_s"]
    summary = cmd.read_json(replay.run_dir / "summary.json")
    view = summary["schedule"]
    assert view["speedup"] == replay.speedup
    assert sum(b["requests"] for b in view["buckets"]) == len(records)
    assert sum(view["offered"]["requests"]) == len(records)
    page = (replay.folder / "report.html").read_text(encoding="utf-8")
    kind = "trace" if replay.traced else "synthetic"
    assert f"Scheduled workload: {kind} at speedup {replay.speedup:g}x" in page
    check_prediction(replay)
