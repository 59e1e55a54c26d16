"""End-to-end ``check`` (the runbook's "Before the trial") against a simulated fleet."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from narwhal_sim.testing import SimFleet

from ._store_kit import write_profiles
from .conftest import Cli

pytestmark = pytest.mark.slow


def _check(cli: Cli, fleet: SimFleet, workload: Path, store: Path, *records: Path) -> Any:
    args = [
        "check",
        "--workload",
        str(workload),
        "--fleet",
        str(fleet.fleet_path),
        "--profiles",
        str(store),
    ]
    for record in records:
        args += ["--launch-record", str(record)]
    return cli(*args)


def test_check_passes_inside_domain_with_caching_off(
    cli: Cli, fresh_fleet: SimFleet, tiny_workload: Path, tmp_path: Path
) -> None:
    """Fits the context, inside the profile domain, prefix caching off everywhere: exit 0."""
    store = write_profiles(fresh_fleet.fleet_path, [256, 1024, 4096], [512, 2048])
    record = tmp_path / "launch-e0.txt"
    record.write_text("vllm serve sim/tiny --max-model-len 32768 --no-enable-prefix-caching\n")
    proc = _check(cli, fresh_fleet, tiny_workload, store, record)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "FAIL" not in proc.stdout
    for what in ("prefill domain", "decode domain", "context limit", "prefix caching off"):
        assert what in proc.stdout
    assert "ok   e0: decode fit quality: mean relative error 2.0%, worst 5.0%" in proc.stdout


@pytest.mark.parametrize(("mean", "worst"), [(0.75, 0.99), (0.21, 0.3), (0.1, 0.51)])
def test_check_fails_a_decode_fit_beyond_the_bounds(
    cli: Cli, fresh_fleet: SimFleet, tiny_workload: Path, tmp_path: Path, mean: float, worst: float
) -> None:
    """A decode fit beyond 20% mean or 50% worst error never silently feeds a trial: exit 2,
    with the figures shown."""
    store = write_profiles(fresh_fleet.fleet_path, [256, 1024, 4096], [512, 2048], (mean, worst))
    record = tmp_path / "launch-e0.txt"
    record.write_text("vllm serve sim/tiny --max-model-len 32768 --no-enable-prefix-caching\n")
    proc = _check(cli, fresh_fleet, tiny_workload, store, record)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    failing = [line for line in proc.stdout.splitlines() if line.startswith("FAIL")]
    assert len(failing) == 1, proc.stdout
    assert failing[0].startswith(
        f"FAIL e0: decode fit quality: mean relative error {mean:.1%}, worst {worst:.1%} "
        "at (concurrency, ctx) [4.0, 2100.0]"
    )
    assert "exceeds" in failing[0] and "re-profile this engine" in failing[0]


def test_check_lists_every_failing_item(
    cli: Cli, fresh_fleet: SimFleet, tiny_workload: Path, tmp_path: Path
) -> None:
    """Outside the domain, caching on per metrics and per launch record: exit 2, all listed."""
    store = write_profiles(fresh_fleet.fleet_path, [2048, 4096, 8192], [2048, 8192])
    fresh_fleet.set_faults("e0", prefix_caching=True)
    record = tmp_path / "launch-e0.txt"
    record.write_text("vllm serve sim/tiny --max-model-len 32768\n")
    proc = _check(cli, fresh_fleet, tiny_workload, store, record)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    failing = [line for line in proc.stdout.splitlines() if line.startswith("FAIL")]
    assert len(failing) == 4, proc.stdout
    text = "\n".join(failing)
    assert "prefill domain" in text and "decode domain" in text
    assert "enable_prefix_caching=True" in text
    assert "launch-e0.txt" in text and "--no-enable-prefix-caching" in text
