"""The conformance tier's CPU split (tools/conformance/_cpus.py): the engine on the last CPU, the
API server moved to the others once ready. Checked on real processes, with the CPUs this machine
lets the test use."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def cpus(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(REPO))
    # the repo root is on sys.path only inside this fixture
    import tools.conformance._cpus as module

    return module


def _allowed(pid: int | str, tid: int | str | None = None) -> set[int]:
    status = Path(f"/proc/{pid}/task/{tid or pid}/status").read_text(encoding="ascii")
    line = next(x for x in status.splitlines() if x.startswith("Cpus_allowed_list:"))
    allowed: set[int] = set()
    for part in line.split(":", 1)[1].strip().split(","):
        low, _, high = part.partition("-")
        allowed.update(range(int(low), int(high or low) + 1))
    return allowed


def test_plan_gives_the_engine_the_last_cpu_and_the_front_the_rest(cpus: ModuleType) -> None:
    assert cpus.plan_split({0}) is None
    assert cpus.plan_split(set()) is None
    two = cpus.plan_split({0, 1})
    assert (two.engine, two.front) == (frozenset({1}), frozenset({0}))
    assert two.describe() == "engine on CPU 1, API server on CPU 0"
    four = cpus.plan_split({0, 2, 3, 5})
    assert (four.engine, four.front) == (frozenset({5}), frozenset({0, 2, 3}))
    assert four.describe() == "engine on CPU 5, API server on CPU 0,2,3"


def test_the_child_and_what_it_forks_start_confined(cpus: ModuleType) -> None:
    ours = os.sched_getaffinity(0)
    engine = frozenset({max(ours)})
    script = textwrap.dedent(
        """
        import os, sys
        child = os.fork()
        if child == 0:
            print(sorted(os.sched_getaffinity(0)), flush=True)
            os._exit(0)
        os.waitpid(child, 0)
        print(sorted(os.sched_getaffinity(0)), flush=True)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        preexec_fn=cpus.confine(engine),
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.split("\n")[:2] == [str(sorted(engine))] * 2
    assert os.sched_getaffinity(0) == ours  # only the child was confined


def test_every_thread_of_the_front_moves_and_its_children_stay(cpus: ModuleType) -> None:
    allowed = os.sched_getaffinity(0)
    split = cpus.plan_split(allowed)
    engine = split.engine if split else frozenset(allowed)
    front = split.front if split else frozenset(allowed)
    script = textwrap.dedent(
        """
        import subprocess, sys, threading, time
        threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
        kid = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        print(kid.pid, flush=True)
        time.sleep(60)
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script],
        preexec_fn=cpus.confine(engine),
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        kid = int(proc.stdout.readline())
        tasks = sorted(p.name for p in Path(f"/proc/{proc.pid}/task").iterdir())
        assert len(tasks) >= 2  # the main thread and the sleeper
        assert cpus.move_threads(proc.pid, front) == len(tasks)
        for tid in tasks:
            assert _allowed(proc.pid, tid) == set(front)
        assert _allowed(kid) == set(engine)  # the engine's processes stay where they started
    finally:
        proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and Path(f"/proc/{kid}").exists():
            try:
                os.kill(kid, 9)
            except ProcessLookupError:
                break
            time.sleep(0.05)


STAT_BEFORE = """cpu  300 0 100 900 10 0 5 20 0 0
cpu0 100 0 50 800 10 0 5 0 0 0
cpu1 200 0 50 100 0 0 0 20 0 0
intr 12345 0 0
"""
STAT_AFTER = """cpu  700 0 150 1000 10 0 5 320 0 0
cpu0 150 0 70 880 10 0 5 0 0 0
cpu1 550 0 80 120 0 0 0 320 0 0
intr 12399 0 0
"""


def test_host_load_counts_busy_and_stolen_seconds_per_cpu(cpus: ModuleType) -> None:
    before = cpus.parse_cpu_stat(STAT_BEFORE, 100.0)
    after = cpus.parse_cpu_stat(STAT_AFTER, 100.0)
    assert set(before) == {0, 1}
    assert before[1]["steal"] == pytest.approx(0.2)
    load = cpus.host_load(before, after)
    assert load == {
        "0": {"busy_s": 0.7, "steal_s": 0.0},
        "1": {"busy_s": 3.8, "steal_s": 3.0},
    }
    assert cpus.host_load(None, after) is None


def test_cpu_seconds_counts_the_cpu_this_process_burns(cpus: ModuleType) -> None:
    """Burn 0.3 s of this process's own CPU time between two readings: the machine's CPUs must
    count at least that as busy (other work only adds; /proc/stat ticks every 10 ms per CPU)."""
    first = cpus.cpu_seconds()
    assert first is not None and set(first) >= os.sched_getaffinity(0)
    start = time.process_time()
    while time.process_time() - start < 0.3:
        pass
    load = cpus.host_load(first, cpus.cpu_seconds())
    assert sum(v["busy_s"] for v in load.values()) >= 0.3 - 0.01 * (len(load) + 1), load
