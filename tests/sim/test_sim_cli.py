"""The narwhal-sim command: help, presets, refusals, and the example fleet."""

from __future__ import annotations

import json
from importlib import metadata
from pathlib import Path

import pytest
from typer.testing import CliRunner

from narwhal_sim import SimStartError
from narwhal_sim.cli import app
from narwhal_sim.model._config import load_json, resolve_engines
from narwhal_sim.testing import start_sim_fleet
from narwhal_store import load_fleet

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_help_lists_options() -> None:
    """`narwhal-sim up --help` names every option."""
    result = CliRunner().invoke(app, ["up", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    for option in (
        "--fleet",
        "--sim-config",
        "--router",
        "--journal",
        "--preset",
        "--time-scale",
        "--seed",
        "--ready-file",
        "--allow-non-loopback",
    ):
        assert option in result.output


def test_version_prints_the_installed_distribution() -> None:
    """`narwhal-sim --version` prints `narwhal-sim (narwhal-sim) VERSION` from the installed
    metadata and exits 0, before any command; the group help lists it."""
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.output.strip() == f"narwhal-sim (narwhal-sim) {metadata.version('narwhal-sim')}"
    helped = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "200"})
    assert helped.exit_code == 0 and "--version" in helped.output and "presets" in helped.output


def test_presets_listed() -> None:
    """`narwhal-sim presets` lists the default and the other presets."""
    result = CliRunner().invoke(app, ["presets"])
    assert result.exit_code == 0
    assert "h200-llama-3.1-8b (default)" in result.output and "overloaded" in result.output


def test_non_loopback_refused(tmp_path: Path) -> None:
    """A fleet URL that is not loopback is refused with exit code 2 unless allowed."""
    fleet = {
        "format": "narwhal.fleet",
        "format_version": 1,
        "profiles": {"path": "p.json"},
        "engines": [{"iid": "e", "url": "http://10.1.2.3:8000", "role": "mixed"}],
    }
    path = tmp_path / "fleet.json"
    path.write_text(json.dumps(fleet))
    result = CliRunner().invoke(app, ["up", "--fleet", str(path)])
    assert result.exit_code == 2
    assert "not loopback" in result.output


@pytest.mark.parametrize("scale", ["0", "-1", "inf", "nan"])
def test_bad_time_scale_refused(tmp_path: Path, scale: str) -> None:
    """--time-scale must be positive and finite: refused (exit 2) before the fleet is read."""
    fleet = str(tmp_path / "never-read.json")
    result = CliRunner().invoke(app, ["up", "--fleet", fleet, "--time-scale", scale])
    assert result.exit_code == 2
    assert "--time-scale must be a finite positive number" in result.output


@pytest.mark.parametrize("slowdown", ["0", "-1.2", "inf", "nan"])
def test_bad_slowdown_refused(tmp_path: Path, slowdown: str) -> None:
    """--slowdown must be positive and finite: refused (exit 2) before the fleet is read."""
    fleet = str(tmp_path / "never-read.json")
    result = CliRunner().invoke(app, ["up", "--fleet", fleet, "--slowdown", slowdown])
    assert result.exit_code == 2
    assert f"--slowdown must be a finite positive number, got {float(slowdown)}" in result.output


def test_example_fleet_resolves() -> None:
    """examples/: a prefill/decode group on one device and a mixed engine on its own."""
    settings = resolve_engines(
        load_fleet(EXAMPLES / "sim-fleet.json"),
        load_json(EXAMPLES / "sim-config.json", "sim config"),
    )
    assert [(s.iid, s.role, s.port) for s in settings] == [
        ("h200-0.prefill", "prefill", 8101),
        ("h200-0.decode", "decode", 8102),
        ("h200-1.mixed", "mixed", 8103),
    ]
    assert settings[0].group == settings[1].group != settings[2].group
    assert all(
        s.max_model_len == 16384 and s.version == "0.11.0" and s.api_style == "0.11"
        for s in settings
    )


def test_up_stops_cleanly_on_sigterm(tmp_path: Path) -> None:
    """start_sim_fleet's fleet exits 0 on SIGTERM after announcing what listened where."""
    fleet = start_sim_fleet(tmp_path, [{"iid": "one", "role": "mixed"}], preset="tiny", router=True)
    with fleet:
        ready = json.loads((tmp_path / "sim-ready.json").read_text())
        assert ready["engines"] == fleet.urls and ready["router"] == fleet.router_url
    assert fleet.process.returncode == 0
    log = fleet.log_path.read_text()
    assert f"engine one (mixed, group solo:one, tiny) {fleet.urls['one']}" in log
    assert "narwhal-sim: stopped" in log


def test_start_failure_reports_log(tmp_path: Path) -> None:
    """A fleet that cannot start raises SimStartError carrying the simulator's error line."""
    with pytest.raises(SimStartError, match="unknown preset"):
        start_sim_fleet(tmp_path, [{"iid": "one", "role": "mixed"}], preset="no-such-preset")
