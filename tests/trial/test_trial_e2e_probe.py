"""The freshness probe end to end: a profile, then the simulator slowed by 20 %, fails
``check --probe``, naming the engine and the factor.

One simulated engine is profiled (a small sweep, time scale 2), probed at once (``narwhal-profile
--verify``: nothing drifted, exit 0) and checked with that probe (exit 0); then the simulator is
started again on the same port with ``--slowdown 1.2`` and probed again: exit 3 naming the engine
and a factor near 1.2, and ``check --probe`` with that probe fails the engine (exit 2). No time
is asserted: the slowdown is in the simulator's model, the factors are ratios of what the same
client measured.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest

from narwhal_sim.testing import start_sim_fleet
from narwhal_store import load_probe, sha256_file

from .conftest import REPO, Cli, prepare_workload

pytestmark = pytest.mark.slow

ENGINES = [{"iid": "e0", "role": "mixed"}]
SWEEP = (
    "--prefill-lens", "1024,4096,16384",
    "--decode-input-lens", "512,2048",
    "--decode-concurrency", "1,4",
    "--decode-tokens", "160",
)  # fmt: skip
TIME_SCALE = 2.0
"""At 2 the shortest TTFT probed (1,024 tokens) is ~16 ms of real time, well above what loopback
HTTP on a busy machine adds, so a 20 % slowdown reads as 1.1 to 1.35 by a wide margin."""


@dataclass(frozen=True)
class Probed:
    """The profiled engine's files: fleet, store, workload, launch record, and both probes with
    the command that wrote each."""

    fleet: Path
    store: Path
    workload: Path
    record: Path
    fresh: Path
    fresh_run: subprocess.CompletedProcess[str]
    slowed: Path
    slowed_run: subprocess.CompletedProcess[str]


def _profile(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "narwhal_profile_cli", *(str(a) for a in args)],
        capture_output=True, text=True, timeout=300, check=False, cwd=REPO,
    )  # fmt: skip


@pytest.fixture(scope="module")
def probed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Probed]:
    """Profile ``e0``, probe it, then probe it again on a simulator 20 % slower."""
    folder = tmp_path_factory.mktemp("probe-e2e")
    with start_sim_fleet(folder / "sim", ENGINES, time_scale=TIME_SCALE) as fleet:
        port = int(fleet.urls["e0"].rsplit(":", 1)[1])
        done = _profile("--fleet", fleet.fleet_path, *SWEEP)
        assert done.returncode == 0, done.stderr
        store = fleet.fleet_path.parent / "profiles" / "fleet-profiles.json"
        fresh = folder / "probe-fresh.json"
        fresh_run = _profile("--fleet", fleet.fleet_path, "--verify", store, "--out", fresh)
        workload = prepare_workload(fleet.urls["e0"], folder)
    with start_sim_fleet(
        folder / "sim", ENGINES, time_scale=TIME_SCALE, slowdown=1.2, ports={"e0": port}
    ) as slowed_fleet:
        assert slowed_fleet.state("e0")["slowdown"] == 1.2
        slowed = folder / "probe-slowed.json"
        slowed_run = _profile(
            "--fleet", slowed_fleet.fleet_path, "--verify", store, "--out", slowed
        )
        record = folder / "launch-e0.txt"
        record.write_text("vllm serve sim --no-enable-prefix-caching\n")
        yield Probed(
            slowed_fleet.fleet_path, store, workload, record, fresh, fresh_run, slowed, slowed_run
        )


def _check(cli: Cli, probed: Probed, probe: Path) -> subprocess.CompletedProcess[str]:
    return cli(
        "check", "--workload", str(probed.workload), "--fleet", str(probed.fleet),
        "--profiles", str(probed.store), "--launch-record", str(probed.record),
        "--probe", str(probe),
    )  # fmt: skip


def test_a_probe_right_after_the_profile_passes(cli: Cli, probed: Probed) -> None:
    """The probe finds no drift (exit 0) and ``check --probe`` passes both its items."""
    assert probed.fresh_run.returncode == 0, probed.fresh_run.stderr
    doc = load_probe(probed.fresh)
    assert doc.drifted() == [] and doc.profiles_sha256 == sha256_file(probed.store)
    drift = doc.engines["e0"]
    for phase in (drift.prefill, drift.decode):
        assert phase is not None and abs(phase.factor - 1) < 0.15
    done = _check(cli, probed, probed.fresh)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(
        r"^ok   e0: engine speed \(probe\): prefill \d\.\d\dx the profile ", done.stdout, re.M
    )
    assert f"ok   {probed.fresh}: probe of this store: " in done.stdout


def test_a_slowed_engine_drifts_and_fails_the_check(cli: Cli, probed: Probed) -> None:
    """The probe of the slowed engine exits 3, says so on stderr with a factor near 1.2, and
    writes its document; ``check --probe`` fails the engine's item, naming the factor (exit 2)."""
    done = probed.slowed_run
    assert done.returncode == 3, done.stderr
    lines = [line for line in done.stderr.splitlines() if "drifted" in line]
    assert len(lines) == 1, done.stderr
    figure = re.search(r"engine e0: (?:prefill|decode) (\d+\.\d\d)x the profile", lines[0])
    assert figure is not None, lines[0]
    assert 1.1 < float(figure[1]) < 1.35, lines[0]
    assert lines[0].endswith("past the 10 % threshold"), lines[0]
    doc = load_probe(probed.slowed)
    assert doc.drifted() == ["e0"]
    drift = doc.engines["e0"]
    assert drift.decode is not None and drift.decode.drifted
    assert 1.1 < drift.decode.factor < 1.35 and drift.decode.low > 1.1
    checked = _check(cli, probed, probed.slowed)
    assert checked.returncode == 2, checked.stdout + checked.stderr
    failing = [line for line in checked.stdout.splitlines() if line.startswith("FAIL")]
    assert len(failing) == 1, checked.stdout
    assert failing[0].startswith("FAIL e0: engine speed (probe): "), failing[0]
    factor = re.search(r"decode (\d+\.\d\d)x the profile \(5-95 % ", failing[0])
    assert factor is not None and 1.1 < float(factor[1]) < 1.35, failing[0]
    assert "past the 10 % threshold" in failing[0]


def test_a_probe_of_another_store_fails_the_check(cli: Cli, probed: Probed, tmp_path: Path) -> None:
    """A probe that compared another store (its SHA-256) fails ``probe of this store``."""
    doc = orjson.loads(probed.fresh.read_bytes())
    doc["profiles_sha256"] = "0" * 64
    other = tmp_path / "probe-other.json"
    other.write_bytes(orjson.dumps(doc))
    done = _check(cli, probed, other)
    assert done.returncode == 2, done.stdout + done.stderr
    failing = [line for line in done.stdout.splitlines() if line.startswith("FAIL")]
    assert failing == [
        f"FAIL {other}: probe of this store: the probe {other} compared {doc['profiles']} "
        f"(SHA-256 000000000000), not {probed.store} (SHA-256 "
        f"{sha256_file(probed.store)[:12]}): probe this store"
    ]


def test_an_unreadable_probe_is_a_blocking_error(cli: Cli, probed: Probed, tmp_path: Path) -> None:
    """A probe document that fails its format: exit 1, one line naming the file and the JSON
    path, before any item is printed."""
    doc = orjson.loads(probed.fresh.read_bytes())
    doc["engines"]["e0"]["seconds"] = -1
    bad = tmp_path / "probe-bad.json"
    bad.write_bytes(orjson.dumps(doc))
    done = _check(cli, probed, bad)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout == ""
    assert done.stderr.startswith(f"load_trial.py: error: {bad}: engines.e0.seconds: ")
    assert done.stderr.count("\n") == 1, done.stderr
