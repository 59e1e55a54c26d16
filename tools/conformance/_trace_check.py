"""A short window of each sample trace replayed on vLLM's server: ``prepare --trace``, ``run
--speedup`` and ``narwhal-report``, with the protocol truths of a scheduled workload (issue 24).

What must hold on the real engine, whatever its speed: every request completes with exactly its
own prompt and output token counts (the engine's usage), requests due together are due at the
same instant, the schedule view accounts for every request, and the report draws its views.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import _commands as cmd
from ._server import VllmServer
from ._suite import DRAIN_GAUGES, TRIAL_BOUNDS, trial_args

EXAMPLES = cmd.REPO / "examples" / "traces"
#: (file, window, speedup): each window's replay lasts a few seconds.
WINDOWS = (
    ("mooncake.jsonl", 4, 2.0),
    ("azure.csv", 5, 4.0),
    ("burstgpt.csv", 5, 50.0),
)


@dataclass
class TraceReplay:
    """One sample's commands and what they wrote."""

    name: str
    speedup: float
    folder: Path
    done: list[cmd.Done] = field(default_factory=list)

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
        return {
            "exits": [d.returncode for d in self.done],
            "requests": summary["requests"],
            "good": summary["good"],
            "max_lag_s": summary["max_lag_s"],
            "densest_second": view.get("densest_second"),
            "wall_s": round(sum(d.wall_s for d in self.done), 1),
        }


def replay_samples(server: VllmServer, root: Path, env: dict[str, str]) -> list[TraceReplay]:
    """Prepare, replay and report a short window of each sample trace."""
    gauges = [arg for gauge in DRAIN_GAUGES for arg in ("--drain-gauge", gauge)]
    out = []
    for name, limit, speedup in WINDOWS:
        replay = TraceReplay(name, speedup, root / name.split(".")[0])
        replay.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        replay.done.append(
            cmd.trial(
                "prepare", *trial_args(server), "--trace", EXAMPLES / name,
                "--limit", str(limit), "--clip-to-model", "--seed", "11",
                "--out", replay.folder / "workload", env=env,
            )
        )  # fmt: skip
        if replay.done[-1].returncode == 0:
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
    assert f"Scheduled workload: trace at speedup {replay.speedup:g}x" in page
