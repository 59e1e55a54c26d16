"""Where the vLLM server's processes run: its engine on one CPU, its HTTP front with everyone else.

vLLM's CPU server is three processes: the API server (HTTP parsing, the SSE stream each client
reads), the engine core (the scheduler) and the worker (the model). The engine core and the
worker wait on each other through a shared-memory ring, spinning with ``sched_yield`` for up to a
second after each message, so while the engine serves they hold a CPU each. On this project's
2-core CI machine with two busy loops beside the tier, that starved every other task for seconds
at a time: a process sleeping 10 ms in a loop (at nice 0, and at nice -10 too) woke up to 7 s
late, only a real-time one never did. The API server then wrote whole streams at once, our
client sent a cohort's four streams a second apart, and the profile refused the cohorts. Raising
the priority of the server and the commands together did not help (the spinning processes are
the server's children and inherit it).

So the tier splits the machine: the server starts confined to the last CPU it may use (the engine
core and the worker, forked by it, inherit that, and ``VLLM_CPU_OMP_THREADS_BIND=nobind`` keeps
vLLM from re-pinning the worker), and once ``/health`` answers, the API server's own threads move
to the other CPUs, where our commands run. The engine then competes only with itself and with
whatever the scheduler moves onto its CPU; the HTTP front and the client never wait behind it.
With the split, the same busy-loop run delivered every chunk of every stream separately (no
bursts) and sent each cohort's streams within 16 ms. A machine with a single CPU has nothing to
split; the server then runs as vLLM places it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class CpuSplit:
    """The engine's CPU and the CPUs of the API server (and of everything else)."""

    engine: frozenset[int]
    front: frozenset[int]

    def describe(self) -> str:
        """``engine on CPU 1, API server on CPU 0`` (for the results and the notes)."""
        return f"engine on CPU {_cpus(self.engine)}, API server on CPU {_cpus(self.front)}"


def _cpus(cpus: frozenset[int]) -> str:
    return ",".join(str(cpu) for cpu in sorted(cpus))


def plan_split(allowed: set[int] | frozenset[int]) -> CpuSplit | None:
    """The highest CPU for the engine, the rest for the front; None with fewer than two CPUs."""
    if len(allowed) < 2:
        return None
    engine = max(allowed)
    return CpuSplit(engine=frozenset({engine}), front=frozenset(allowed) - {engine})


def current_split() -> CpuSplit | None:
    """The split for the CPUs this process may use."""
    return plan_split(os.sched_getaffinity(0))


def confine(cpus: frozenset[int]) -> Callable[[], None]:
    """A ``preexec_fn`` that confines the child (and all it forks) to ``cpus`` before exec."""

    def _confine() -> None:
        os.sched_setaffinity(0, cpus)

    return _confine


def move_threads(pid: int, cpus: frozenset[int]) -> int:
    """Move every thread of process ``pid`` (not its children) to ``cpus``; returns how many
    moved. Threads it starts later inherit the affinity of the thread that starts them."""
    moved = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            os.sched_setaffinity(int(task.name), cpus)
        except ProcessLookupError:
            continue  # the thread ended meanwhile
        moved += 1
    return moved


#: /proc/stat's fields after the CPU's name, in order (man 5 proc).
_STAT_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def parse_cpu_stat(text: str, ticks_per_s: float) -> dict[int, dict[str, float]]:
    """Per CPU, the seconds ``/proc/stat`` counts since boot in each of ``_STAT_FIELDS``."""
    out: dict[int, dict[str, float]] = {}
    for line in text.splitlines():
        name, *fields = line.split() or [""]
        if not name.startswith("cpu") or name == "cpu":
            continue
        values = [int(v) / ticks_per_s for v in fields[: len(_STAT_FIELDS)]]
        out[int(name[3:])] = dict(zip(_STAT_FIELDS, values, strict=False))
    return out


def cpu_seconds() -> dict[int, dict[str, float]] | None:
    """This machine's ``parse_cpu_stat`` now; None where there is no ``/proc/stat``."""
    try:
        text = Path("/proc/stat").read_text(encoding="ascii")
    except OSError:
        return None
    return parse_cpu_stat(text, float(os.sysconf("SC_CLK_TCK")))


def host_load(
    before: dict[int, dict[str, float]] | None, after: dict[int, dict[str, float]] | None
) -> dict[str, dict[str, float]] | None:
    """Per CPU between two readings: seconds busy (everything but idle and iowait) and seconds
    stolen (a virtual machine's CPU waiting while its host ran someone else: the guest's clock
    runs on and every process on that CPU looks slower)."""
    if before is None or after is None:
        return None
    out: dict[str, dict[str, float]] = {}
    for cpu in sorted(set(before) & set(after)):
        gone = {k: after[cpu][k] - before[cpu].get(k, 0.0) for k in after[cpu]}
        busy = sum(v for k, v in gone.items() if k not in ("idle", "iowait", "steal"))
        out[str(cpu)] = {"busy_s": round(busy, 2), "steal_s": round(gone.get("steal", 0.0), 2)}
    return out
