"""Kill during write: SIGKILL a process that writes profile stores, at a random moment, many times.

Each trial starts a writer (this script with ``--child``) that loads a real store pair (measured
once by ``narwhal-profile`` against ``narwhal-sim``) and writes it over and over, each time with a
new ``created_at`` so every write changes both files and their digests. After a random 0-40 ms of
writing it is killed with SIGKILL. Then the store is checked as a user would meet it:

- **corrupt**: ``read_store(path)`` (verified) fails for a store that exists;
- **unrecoverable**: after ``finish_pending`` the pair still does not read verified and clean (not
  ``recovered``), or a fresh output that was never committed cannot be written again;
- **leftover**: after the next write of that store (as the next run would do), any file in the
  folder other than the stores and their sidecars (``.tmp`` files, ``.pending`` sidecars).

Half the trials write in ``replace`` mode to one store (a live sweep with ``--overwrite``), half in
``fresh`` mode to new names (refits and merges), all in one folder per mode, so leftovers of
earlier kills would pile up. ``interrupted`` counts trials whose kill visibly landed inside a write
(a temporary or pending file, or a recovered pair, was found before cleaning): a lower bound.

    .venv/bin/python bench/store_kill_loop.py --trials 220

Result (2026-12-01, the shared 2-core box under load, two busy loops running): 220 trials (110
replace, 110 fresh), 173 visibly interrupted mid-write (87 + 86), 0 corrupt, 0 unrecoverable, 0
leftover files.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from narwhal_sim.testing import start_sim_fleet
from narwhal_store import (
    ProfileStore,
    SamplesSidecar,
    StoreError,
    finish_pending,
    read_store,
    sidecar_path,
    write_store,
)

_SWEEP = ("--prefill-lens", "256,1024,4096", "--decode-input-lens", "512,2048")


def _template(workdir: Path) -> Path:
    """A real store pair: one small live sweep of a simulated engine."""
    with start_sim_fleet(workdir / "sim", [{"iid": "e0", "role": "mixed"}], time_scale=2.0) as f:
        cmd = [sys.executable, "-m", "narwhal_profile_cli", "--fleet", str(f.fleet_path), *_SWEEP]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
        if done.returncode != 0:
            raise SystemExit(f"the template sweep failed: {done.stderr.strip()}")
        return f.fleet_path.parent / "profiles" / "fleet-profiles.json"


def _child(mode: str, folder: Path, template: Path) -> None:
    """Write the template again and again (never returns; the parent kills it)."""
    loaded = read_store(template)
    print("ready", flush=True)
    n = 0
    while True:
        n += 1
        stamp = f"2026-12-01T00:{n // 60 % 60:02d}:{n % 60:02d}+00:00"
        store = loaded.store.model_copy(update={"created_at": stamp})
        sidecar = loaded.sidecar.model_copy(update={"created_at": stamp})
        if mode == "replace":
            write_store(folder / "live.json", store, sidecar, mode="replace")
        else:
            write_store(folder / f"out-{os.getpid()}-{n:06d}.json", store, sidecar, mode="fresh")


@dataclass
class Tally:
    trials: int = 0
    interrupted: int = 0
    corrupt: int = 0
    unrecoverable: int = 0
    leftover: int = 0


def _names(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir()}


def _is_output(name: str) -> bool:
    return not name.startswith(".") and name.endswith(".json")


def _check(path: Path, tally: Tally) -> None:
    """A committed store must read verified; after finish_pending it must read clean."""
    try:
        first = read_store(path)
    except StoreError:
        tally.corrupt += 1
        first = None
    try:
        finish_pending(path)
        again = read_store(path)
    except StoreError:
        tally.unrecoverable += 1
        return
    if again.recovered or (first is not None and first.store != again.store):
        tally.unrecoverable += 1


def _trial(mode: str, folder: Path, template: Path, rng: random.Random, tally: Tally) -> None:
    before = _names(folder)
    child = subprocess.Popen(
        [sys.executable, __file__, "--child", mode, str(folder), str(template)],
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    assert child.stdout is not None
    if child.stdout.readline().strip() != b"ready":
        raise SystemExit(f"writer failed to start (exit {child.wait()})")
    time.sleep(rng.uniform(0.0, 0.04))
    child.send_signal(signal.SIGKILL)
    child.wait()
    child.stdout.close()
    tally.trials += 1
    names = _names(folder)
    hidden = {n for n in names if n.startswith(".")}
    loaded = template
    if mode == "replace":
        path = folder / "live.json"
        recovered = path.exists() and _recovered(path)
        tally.interrupted += bool(hidden or recovered)
        if path.exists():
            _check(path, tally)
        write_store(path, *_pair(loaded), mode="replace")  # the next run's write
    else:
        new = sorted(n for n in names - before if _is_output(n) and ".samples." not in n)
        last = folder / new[-1] if new else None
        recovered = last is not None and _recovered(last)
        tally.interrupted += bool(hidden or recovered)
        for name in new:
            _check(folder / name, tally)
        retry = folder / f"retry-{tally.trials:06d}.json"
        write_store(retry, *_pair(loaded), mode="fresh")  # the next refit or merge
        for name in hidden:  # a fresh write that never committed: its name must be writable again
            stem = name[1:].split(".samples.json.")[0].split(".json.")[0]
            target = folder / f"{stem}.json"
            if not target.exists():
                try:
                    write_store(target, *_pair(loaded), mode="fresh")
                except StoreError:
                    tally.unrecoverable += 1
    tally.leftover += sum(1 for n in _names(folder) if not _is_output(n))


def _recovered(path: Path) -> bool:
    try:
        return read_store(path).recovered
    except StoreError:
        return False


_PAIRS: dict[Path, tuple[ProfileStore, SamplesSidecar]] = {}


def _pair(template: Path) -> tuple[ProfileStore, SamplesSidecar]:
    if template not in _PAIRS:
        loaded = read_store(template)
        _PAIRS[template] = (loaded.store, loaded.sidecar)
    return _PAIRS[template]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=220)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--child", nargs=3, metavar=("MODE", "FOLDER", "TEMPLATE"))
    args = parser.parse_args()
    if args.child:
        mode, folder, template = args.child
        _child(mode, Path(folder), Path(template))
        return
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory(prefix="narwhal-kill-") as tmp:
        root = Path(tmp)
        template = _template(root)
        tallies = {mode: Tally() for mode in ("replace", "fresh")}
        for k in range(args.trials):
            mode = "replace" if k % 2 == 0 else "fresh"
            folder = root / mode
            folder.mkdir(exist_ok=True)
            _trial(mode, folder, template, rng, tallies[mode])
        total = Tally()
        for mode, t in tallies.items():
            print(
                f"{mode:8s} trials {t.trials:4d}  interrupted {t.interrupted:4d}  corrupt "
                f"{t.corrupt}  unrecoverable {t.unrecoverable}  leftover files {t.leftover}"
            )
            for field in ("trials", "interrupted", "corrupt", "unrecoverable", "leftover"):
                setattr(total, field, getattr(total, field) + getattr(t, field))
        print(
            f"total    trials {total.trials:4d}  interrupted {total.interrupted:4d}  corrupt "
            f"{total.corrupt}  unrecoverable {total.unrecoverable}  leftover files {total.leftover}"
        )
        if total.corrupt or total.unrecoverable or total.leftover:
            raise SystemExit(1)
        assert sidecar_path(root / "replace" / "live.json").exists()


if __name__ == "__main__":
    main()
