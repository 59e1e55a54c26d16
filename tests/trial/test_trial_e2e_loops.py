"""``run --loop``: the trial on asyncio's loop and on uvloop's (every vLLM environment has uvloop),
the choice recorded, and what happens when the loop cannot be had or the client breaks."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from narwhal_sim.testing import SimFleet
from narwhal_trial import Manifest, Summary
from narwhal_trial._errors import TrialUsageError
from narwhal_trial.run._event_loop import check_loop, resolve_loop

from .conftest import Cli, read_run, run_args

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(("choice", "used", "transport"), [
    ("asyncio", "asyncio", "raw"), ("asyncio", "asyncio", "httpx"),
    ("uvloop", "uvloop", "raw"), ("uvloop", "uvloop", "httpx"),
    ("auto", "uvloop", "auto"), (None, "asyncio", "auto"),
])  # fmt: skip
def test_a_run_on_each_loop_is_valid_and_records_the_loop(
    cli: Cli,
    shared_fleet: SimFleet,
    tiny_workload: Path,
    tmp_path: Path,
    choice: str | None,
    used: str,
    transport: str,
) -> None:
    """Every offer sent, every stream completed, on the loop asked for, with each stream transport
    (auto: uvloop, which this environment has); the manifest says which loop ran and what was
    asked. Without --loop the run is on asyncio's loop (the default)."""
    out = tmp_path / f"{choice}-{transport}"
    flags = {"transport": transport} | ({} if choice is None else {"loop": choice})
    proc = cli(*run_args(str(shared_fleet.router_url), tiny_workload, out, requests=16,
                         attainment=0.5, **flags))  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    manifest, records, summary = read_run(out)
    Manifest.model_validate(manifest)
    Summary.model_validate(summary)
    assert manifest["event_loop"] == used
    assert manifest["arguments"]["loop"] == (choice or "asyncio")
    assert manifest["limits"]["stream_transport"] == ("raw" if transport == "auto" else transport)
    assert summary["sent"] == 16 and summary["client_schedule_valid"]
    assert {r["status"] for r in records} == {"completed"}
    assert all(r["completion_tokens"] == 32 for r in records)


def _shadow(folder: Path, source: str) -> dict[str, str]:
    """An environment whose ``import uvloop`` finds ``source`` first."""
    (folder / "uvloop").mkdir(parents=True)
    (folder / "uvloop" / "__init__.py").write_text(textwrap.dedent(source), encoding="utf-8")
    return {"PYTHONPATH": os.pathsep.join([str(folder), os.environ.get("PYTHONPATH", "")])}


def test_a_uvloop_that_cannot_be_imported_is_refused_or_passed_over(
    cli: Cli, shared_fleet: SimFleet, tiny_workload: Path, tmp_path: Path
) -> None:
    """Asked for by name, a broken uvloop is one line and exit 1 with no run folder; auto runs on
    asyncio's loop instead and says so in the manifest."""
    env = _shadow(tmp_path / "shadow", "raise ImportError('built for another Python')\n")
    base = str(shared_fleet.router_url)
    refused = tmp_path / "refused"
    proc = cli(*run_args(base, tiny_workload, refused, requests=4, loop="uvloop"), env=env)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        "load_trial.py: error: --loop uvloop: uvloop is installed but cannot be imported "
        "(built for another Python); use --loop asyncio"
    ]
    assert not refused.exists()
    auto = tmp_path / "auto"
    proc = cli(*run_args(base, tiny_workload, auto, requests=4, attainment=0.5, loop="auto"),
               env=env)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert read_run(auto)[0]["event_loop"] == "asyncio"


def test_a_crash_before_the_first_offer_judges_nothing(
    cli: Cli, shared_fleet: SimFleet, tiny_workload: Path, tmp_path: Path
) -> None:
    """A loop whose connections fail with a bug (an AssertionError, as an isinstance check on
    uvloop's transports once raised) stops the run before any offer: exit 1, a summary that
    judges nothing (no pass, no valid schedule), the bug's place in the error, and stdout never
    claiming a valid schedule of 0 sent."""
    env = _shadow(
        tmp_path / "shadow",
        """
        import asyncio

        class _Broken(asyncio.SelectorEventLoop):
            async def create_connection(self, *args, **kwargs):
                raise AssertionError

        def new_event_loop():
            return _Broken()
        """,
    )
    out = tmp_path / "run"
    proc = cli(*run_args(str(shared_fleet.router_url), tiny_workload, out, loop="uvloop"), env=env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "schedule valid" not in proc.stdout
    assert "not judged: the run stopped before its first offer -> ERROR" in proc.stdout
    manifest, records, summary = read_run(out)
    assert manifest["event_loop"] == "uvloop" and records == []
    assert summary["offered"] == summary["sent"] == 0 and summary["exit_code"] == 1
    assert summary["pass"] is False and summary["client_schedule_valid"] is False
    assert summary["error"].startswith("internal error: AssertionError: no message (at ")


def test_check_loop_names_the_bad_value_and_the_missing_module(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An unknown --loop and a uvloop that is not installed are usage errors naming the value;
    auto without uvloop is asyncio's loop."""
    with pytest.raises(TrialUsageError, match=r"--loop must be one of auto, asyncio, uvloop"):
        check_loop("trio")
    monkeypatch.setattr("narwhal_trial.run._event_loop.uvloop_available", lambda: False)
    with pytest.raises(TrialUsageError, match=r"--loop uvloop: uvloop is not installed"):
        check_loop("uvloop")
    assert resolve_loop("auto") == (None, "asyncio")
