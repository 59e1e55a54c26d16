"""Helpers for the refit, merge and colocated tests (``test_modes_*.py``): fleet files for the two
engines on one simulated shared GPU, store copies, an in-process run. Their fixtures (``sim``,
``measured``) are in ``conftest.py``."""

from __future__ import annotations

import contextlib
import io
import shutil
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from narwhal_profile_cli import cli
from narwhal_sim.testing import SimFleet
from narwhal_store import sha256_file
from narwhal_store._paths import pending_sidecar_name

from ._command import ProfileRun

#: A small sweep: three prefill lengths, two decode input lengths, two concurrencies. 192-token
#: streams decode for ~0.27 s of real time at time scale 4, so an 8-stream cohort overlaps by design
#: however late a loaded machine starts its last stream (64 tokens gave ~90 ms). Prefill lengths
#: from 2,048 tokens keep every TTFT at 13 ms of real time or more, well above what loopback HTTP
#: on a loaded machine adds (from 256 tokens, ~4 ms, the prefill gate once failed at 23%).
SWEEP = (
    "--prefill-lens",
    "2048,8192,16384",
    "--decode-input-lens",
    "512,2048",
    "--decode-concurrency",
    "1,8",
    "--decode-tokens",
    "192",
)

#: Two engines sharing one simulated GPU (group g0); each test's fleet file gives them roles.
IIDS = ("g0.a", "g0.b")


def run_in_process(*args: str | Path) -> ProfileRun:
    """Run the same command in this process (``narwhal_profile_cli.cli.run``): no start-up cost."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.run([str(a) for a in args])
    return ProfileRun(code, out.getvalue(), err.getvalue())


def write_fleet(
    folder: Path,
    sim: SimFleet,
    roles: Mapping[str, str],
    *,
    store: str = "profiles/store.json",
    name: str = "fleet.json",
    extra: Sequence[dict[str, Any]] = (),
) -> Path:
    """A fleet file in ``folder`` for the simulated engines with ``roles``, plus ``extra``."""
    folder.mkdir(parents=True, exist_ok=True)
    engines = [
        {"iid": iid, "url": sim.urls[iid], "role": roles[iid], "shared_device": {"group": "g0"}}
        for iid in IIDS
    ]
    doc = {
        "format": "narwhal.fleet",
        "format_version": 1,
        "profiles": {"path": store},
        "engines": [*engines, *extra],
    }
    path = folder / name
    path.write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2))
    return path


def samples_of(store: Path) -> Path:
    """The sidecar beside ``store``."""
    return store.with_name(store.stem + ".samples.json")


def copy_store(store: Path, folder: Path, name: str, *, sidecar: bool = True) -> Path:
    """Copy ``store`` (and its sidecar) into ``folder`` as ``name``."""
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / name
    shutil.copyfile(store, target)
    if sidecar:
        shutil.copyfile(samples_of(store), samples_of(target))
    return target


def interrupt_between_renames(store: Path) -> Path:
    """Leave ``store`` as a write killed between its two renames does: the sidecar exists only
    under its pending name. Returns that name's path."""
    side = samples_of(store)
    pending = side.with_name(pending_sidecar_name(side.name, sha256_file(side)))
    side.rename(pending)
    return pending


def load(path: Path) -> Any:
    """A JSON file's document."""
    return orjson.loads(path.read_bytes())


def wait_idle(sim: SimFleet, timeout_s: float = 30.0) -> None:
    """Wait until no engine holds running or waiting requests."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        states = [sim.state(iid) for iid in IIDS]
        if all(s["running"] == 0 and s["waiting"] == 0 for s in states):
            return
        time.sleep(0.05)
    raise AssertionError(f"simulated engines still busy after {timeout_s} s")


@dataclass(frozen=True)
class Measured:
    """Two live stores of the same engines measured under different role mixes."""

    fleet_a: Path  # g0.a prefill, g0.b decode
    store_a: Path
    fleet_b: Path  # g0.a decode, g0.b prefill
    store_b: Path
