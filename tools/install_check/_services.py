"""What the installed commands run against, started once per session from the workspace: a
simulated engine behind the router, the same behind a router that answers as NVIDIA Dynamo's
frontend (for ``prepare --tokenizer``), the simulator's model folder, and a profile store and a
trial run folder for ``narwhal-report`` (made by the workspace's own ``narwhal-profile`` and
``narwhal-trial``). Each is started on first use and stopped by ``close``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from narwhal_sim import write_model_folder
from narwhal_sim.testing import SimFleet, start_sim_fleet

#: Simulated time runs this much faster than real time (as the profile tests run it).
TIME_SCALE = 4.0
#: The smallest sweep the profiler's minimums allow, with long prefills and streams so that its
#: gates pass by design on a loaded machine (tests/profile/conftest.py explains the figures).
SWEEP = (
    "--prefill-lens", "2048,8192,16384",
    "--decode-input-lens", "512,2048",
    "--decode-concurrency", "1,4",
    "--decode-tokens", "160",
)  # fmt: skip
#: The workload every trial check prepares: small and quick.
SHAPE = ("--input-tokens", "64", "--output-tokens", "8", "--seed", "1729")
#: A run that passes on any machine (4 requests, loose bounds); a busy machine may still miss its
#: schedule, which is a judged run (exit 2) with every record written.
RUN = ("--rate", "4", "--requests", "4", "--ttft", "10", "--tpot", "1", "--attainment", "0.5")
ENGINE = "e0"
_TIMEOUT_S = 600


@dataclass
class Services:
    """The session's simulated engines and the report's inputs, under ``folder``."""

    folder: Path
    _started: list[SimFleet] = field(default_factory=list)

    def _start(self, name: str, *router_options: str) -> SimFleet:
        fleet = start_sim_fleet(
            self.folder / name,
            [{"iid": ENGINE, "role": "mixed"}],
            router=True,
            time_scale=TIME_SCALE,
            router_options=router_options,
            ready_timeout_s=120.0,
        )
        self._started.append(fleet)
        return fleet

    @cached_property
    def fleet(self) -> SimFleet:
        """One simulated engine behind the router (its fleet file is ``fleet.fleet_path``)."""
        return self._start("fleet")

    @cached_property
    def dynamo(self) -> SimFleet:
        """One simulated engine behind a router that answers as Dynamo's frontend does."""
        return self._start("dynamo", "--router-mimic", "dynamo")

    @cached_property
    def model_dir(self) -> Path:
        """The simulator's model folder (its ``tokenizer.json``)."""
        folder = self.folder / "model"
        write_model_folder(folder)
        return folder

    @cached_property
    def report_inputs(self) -> tuple[Path, Path]:
        """A profile store (fleet file one folder up) and a trial run folder, made here by the
        workspace's commands: ``(store, run)``."""
        folder = self.folder / "report-inputs"
        folder.mkdir()
        fleet_file = write_fleet_file(folder, self.fleet)
        base = str(self.fleet.router_url)
        _workspace("narwhal_profile_cli", folder, "--fleet", str(fleet_file), *SWEEP)
        _workspace("narwhal_trial", folder, "prepare", "--base", base, *SHAPE, "--out", "workload")
        _workspace(
            "narwhal_trial", folder, "run", "--base", base, "--workload",
            "workload/workload.json", *RUN, "--out", "rate-4", codes=(0, 2),
        )  # fmt: skip
        return folder / "profiles" / "fleet-profiles.json", folder / "rate-4"

    def close(self) -> None:
        """Stop every fleet started."""
        for fleet in self._started:
            fleet.stop()


def write_fleet_file(folder: Path, fleet: SimFleet) -> Path:
    """``folder/fleet.json``: ``fleet``'s fleet file, so a sweep writes under ``folder``."""
    target = folder / "fleet.json"
    target.write_text(fleet.fleet_path.read_text(encoding="utf-8"), encoding="utf-8")
    return target


def _workspace(
    module: str, cwd: Path, *args: str, codes: tuple[int, ...] = (0,)
) -> subprocess.CompletedProcess[str]:
    """Run a workspace command (``python -m MODULE``) in ``cwd``; fail unless it exits in
    ``codes``."""
    done = subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=_TIMEOUT_S,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    if done.returncode not in codes:
        raise RuntimeError(
            f"workspace {module} {' '.join(args)} exited {done.returncode}:\n"
            f"{done.stdout}{done.stderr}"
        )
    return done


def read_json(path: Path) -> dict[str, object]:
    """A JSON object from disk."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    assert isinstance(doc, dict), path
    return doc
