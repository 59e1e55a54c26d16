"""Scheduler settings in each profile (docs/design.md §13): what the engine shows (a simulated
engine in ``dev_mode`` serves vLLM's ``/server_info``), else the limits file, else unknown; a
limits file contradicting the engine aborts before anything is measured; a refit keeps them."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from narwhal_engine_client import SchedulerConfig
from narwhal_profile_cli._errors import ProfileAbortError
from narwhal_profile_cli.results._quality import fit_lines
from narwhal_profile_cli.sweeps._scheduler import scheduler_settings, scheduler_summary
from narwhal_sim.testing import SimFleet, sim_config, start_sim_fleet
from narwhal_store import EngineLimits, SchedulerSettings, read_store

from ._command import ProfileRun, run_profile_command
from ._modes import run_in_process
from .conftest import SMALL_SWEEP, TIME_SCALE, read_json, store_paths

#: ``dev`` shows its settings (dev_mode, a 2,048-token budget); ``lim`` and ``bare`` do not.
ENGINES: list[dict[str, Any]] = [
    {"iid": "dev", "role": "mixed"},
    {"iid": "lim", "role": "mixed"},
    {"iid": "bare", "role": "mixed"},
]
SIM = sim_config({}, dev={"dev_mode": True, "max_num_batched_tokens": 2048})
#: The limits file of the sweep: ``dev``'s agrees with what it shows (and caps its concurrency at
#: 4); ``lim``'s gives the budget and the sequence cap the engine does not show.
LIMITS: dict[str, Any] = {
    "dev": {"max_num_seqs": 4, "enable_chunked_prefill": True},
    "lim": {"max_num_batched_tokens": 4096, "max_num_seqs": 4},
}


def _limits_file(path: Path, engines: dict[str, Any]) -> Path:
    doc = {"format": "narwhal.limits", "format_version": 1, "engines": engines}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(orjson.dumps(doc))
    return path


@dataclass(frozen=True)
class Swept:
    """The three engines, the limits file and the one live sweep of them."""

    sim: SimFleet
    limits: Path
    done: ProfileRun
    store: Path

    def scheduler(self, iid: str) -> dict[str, Any]:
        """Engine ``iid``'s recorded scheduler settings (JSON form)."""
        (profile,) = [p for p in read_json(self.store)["profiles"] if p["key"]["engine"] == iid]
        scheduler = profile["scheduler"]
        assert isinstance(scheduler, dict)
        return scheduler


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Swept]:
    """One small live sweep of the three engines with the limits file."""
    workdir = tmp_path_factory.mktemp("scheduler")
    with start_sim_fleet(workdir / "sim", ENGINES, sim_config=SIM, time_scale=TIME_SCALE) as sim:
        limits = _limits_file(workdir / "limits.json", LIMITS)
        done = run_profile_command("--fleet", sim.fleet_path, "--limits", limits, *SMALL_SWEEP)
        assert done.returncode == 0, done.stderr
        yield Swept(sim, limits, done, store_paths(sim)[0])


def _setting(value: object, source: str) -> dict[str, Any]:
    return {"value": value, "source": source}


@pytest.mark.slow
def test_engine_shown_settings_have_source_engine(swept: Swept) -> None:
    """(a) A dev-mode engine's budget, sequence cap and chunked prefill come from the engine; the
    limits file's max_num_seqs still caps the sweep's concurrency."""
    assert swept.scheduler("dev") == {
        "max_num_batched_tokens": _setting(2048, "engine"),
        "max_num_seqs": _setting(1024, "engine"),
        "chunked_prefill": _setting(True, "engine"),
    }
    sidecar = read_json(store_paths(swept.sim)[1])
    (entry,) = [e for e in sidecar["profiles"] if e["key"]["engine"] == "dev"]
    assert entry["settings"]["limits_applied"] == {"max_num_seqs": 4}


@pytest.mark.slow
def test_limits_file_gives_what_the_engine_does_not_show(swept: Swept) -> None:
    """(b) Without dev mode, the limits file's settings are recorded with source limits."""
    assert swept.scheduler("lim") == {
        "max_num_batched_tokens": _setting(4096, "limits"),
        "max_num_seqs": _setting(4, "limits"),
        "chunked_prefill": _setting(None, "unknown"),
    }


@pytest.mark.slow
def test_neither_leaves_them_unknown(swept: Swept) -> None:
    """(c) No dev mode and no limits: every setting unknown (the store reads back as such)."""
    assert swept.scheduler("bare") == SchedulerSettings.unknown().model_dump(mode="json")
    loaded = read_store(swept.store)
    assert [p.scheduler for p in loaded.store.profiles if p.key.engine == "bare"] == [
        SchedulerSettings.unknown()
    ]


@pytest.mark.slow
def test_summary_shows_one_scheduler_line_per_engine(swept: Swept) -> None:
    """The text summary follows each fit line with the engine's scheduler line."""
    swept.done.success(f"wrote 3 profile(s) to {swept.store}", ["dev", "lim", "bare"])
    lines = [line for line in swept.done.stdout.splitlines() if ": scheduler: " in line]
    assert lines == [
        "dev: scheduler: budget 2048 tokens (engine), max_num_seqs 1024 (engine), "
        "chunked prefill on (engine)",
        "lim: scheduler: budget 4096 tokens (limits), max_num_seqs 4 (limits), "
        "chunked prefill unknown",
        "bare: scheduler: budget unknown, max_num_seqs unknown, chunked prefill unknown",
    ]


@pytest.mark.slow
def test_refit_keeps_the_scheduler_settings(swept: Swept, tmp_path: Path) -> None:
    """(e) A refit's profiles record the same settings as the live store's."""
    out = tmp_path / "refit.json"
    samples = store_paths(swept.sim)[1]
    done = run_in_process("--fleet", swept.sim.fleet_path, "--refit-samples", samples, "--out", out)
    assert done.returncode == 0, done.stderr
    before = {p["key"]["engine"]: p["scheduler"] for p in read_json(swept.store)["profiles"]}
    after = {p["key"]["engine"]: p["scheduler"] for p in read_json(out)["profiles"]}
    assert after == before
    assert after["dev"]["max_num_batched_tokens"] == _setting(2048, "engine")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("given", "words"),
    [
        (
            {"max_num_batched_tokens": 4096},
            "max_num_batched_tokens 2048 but the limits file gives 4096",
        ),
        (
            {"enable_chunked_prefill": False},
            "enable_chunked_prefill true but the limits file gives false",
        ),
    ],
    ids=["budget", "chunked-prefill"],
)
def test_a_limits_file_contradicting_the_engine_aborts(
    swept: Swept, tmp_path: Path, given: dict[str, Any], words: str
) -> None:
    """(d) The engine shows a budget (or chunked prefill) the limits file contradicts: one error
    line naming the engine, the key, both values and the file; exit 1; nothing measured or
    written. ``dev`` comes last in this fleet, so the others pass their preflight first."""
    sim = swept.sim
    doc = orjson.loads(sim.fleet_path.read_bytes())
    doc["engines"] = sorted(doc["engines"], key=lambda e: e["iid"] == "dev")
    fleet = tmp_path / "fleet.json"
    fleet.write_bytes(orjson.dumps(doc))
    limits = _limits_file(tmp_path / "bad-limits.json", {"dev": given})
    steps = {iid: sim.state(iid)["device_steps"] for iid in sim.urls}
    done = run_in_process("--fleet", fleet, "--limits", limits, *SMALL_SWEEP)
    assert done.returncode == 1
    (line,) = done.stderr.splitlines()
    assert line.startswith("narwhal-profile: error: engine dev: the engine shows ")
    assert words in line and str(limits) in line
    assert not (tmp_path / "profiles").exists()
    assert {iid: sim.state(iid)["device_steps"] for iid in sim.urls} == steps
    as_json = run_in_process("--fleet", fleet, "--limits", limits, "--format", "json")
    assert as_json.result()["error"]["code"] == "scheduler_mismatch"
    assert as_json.result()["error"]["engine"] == "dev"


# Units: the precedence and the summary, without engines ------------------------------------------


def test_precedence_engine_then_limits_then_unknown() -> None:
    """Setting by setting: the engine's value, else the limits file's, else unknown."""
    shown = SchedulerConfig(
        max_num_batched_tokens=8192, max_num_seqs=None, enable_chunked_prefill=None
    )
    given = EngineLimits(max_num_seqs=16, max_num_batched_tokens=8192)
    settings = scheduler_settings("e0", shown, given)
    assert settings.model_dump(mode="json") == {
        "max_num_batched_tokens": _setting(8192, "engine"),
        "max_num_seqs": _setting(16, "limits"),
        "chunked_prefill": _setting(None, "unknown"),
    }
    assert scheduler_settings("e0", None, None) == SchedulerSettings.unknown()


def test_max_num_seqs_is_never_compared() -> None:
    """The limits file's max_num_seqs caps the sweep: a different engine value is recorded."""
    shown = SchedulerConfig(2048, 256, True)
    settings = scheduler_settings("e0", shown, EngineLimits(max_num_seqs=8))
    assert (settings.max_num_seqs.value, settings.max_num_seqs.source) == (256, "engine")


def test_both_mismatches_in_one_line() -> None:
    """Two contradicted keys are named in the one message, with the limits file."""
    shown = SchedulerConfig(2048, 128, True)
    given = EngineLimits(max_num_batched_tokens=8192, enable_chunked_prefill=False)
    with pytest.raises(ProfileAbortError) as caught:
        scheduler_settings("e0", shown, given, Path("lim.json"))
    message = caught.value.message
    assert "\n" not in message and caught.value.code == "scheduler_mismatch"
    assert "max_num_batched_tokens 2048 but the limits file gives 8192" in message
    assert "enable_chunked_prefill true but the limits file gives false" in message
    assert "limits file lim.json" in message


def test_fit_lines_add_the_scheduler_line() -> None:
    """A profile with settings gets its scheduler line after its fit line; one without, none."""
    good = {"mean_rel_error": 0.012, "worst_rel_error": 0.03, "worst_point": [256]}
    recorded = SchedulerSettings.unknown().model_dump(mode="json")
    recorded["chunked_prefill"] = _setting(False, "limits")
    figures = [
        {"engine": "a", "key": "a (k)", "prefill": good, "decode": None, "decode_suspect": None,
         "scheduler": recorded},
        {"engine": "b", "key": "b (k)", "prefill": good, "decode": None, "decode_suspect": None,
         "scheduler": None},
    ]  # fmt: skip
    assert fit_lines(figures) == [
        "a: prefill fit mean 1.2% worst 3.0%; decode fit none",
        "a: scheduler: budget unknown, max_num_seqs unknown, chunked prefill off (limits)",
        "b: prefill fit mean 1.2% worst 3.0%; decode fit none",
    ]
    assert scheduler_summary(recorded).endswith("chunked prefill off (limits)")
