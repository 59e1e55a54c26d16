"""Fixtures of the conformance tier: the vLLM venv, the model folder, one server at a time; the
Dynamo venv and its model folder (``dynamo``, for ``test_dynamo.py``); our wheels (``wheels``,
built once for the tests that install them into an engine's venv).

Run through ``make conformance`` (``python -m tools.conformance.run``), which installs or reuses the
venv and builds the model first and passes them in ``NARWHAL_CONFORMANCE_*`` variables; run
directly (``.venv/bin/pytest tools/conformance -p no:cacheprovider``) it does both itself (and the
Dynamo venv, when a Dynamo test is selected). A
skipped or xfailed test fails the session: this tier never skips silently.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ._dynamo import build_model_folder
from ._dynamo_venv import default_dynamo_venv, ensure_dynamo_venv
from ._installed import Wheels, build_wheels
from ._model import build_model
from ._state import Conformance
from ._venv import default_venv, ensure_venv

REPO = Path(__file__).resolve().parents[2]
RUN_DIR_ENV = "NARWHAL_CONFORMANCE_RUN_DIR"
MODEL_ENV = "NARWHAL_CONFORMANCE_MODEL"
#: Per-test limit: the first test of a module also starts its server (1-2 min, 6 min at most).
TEST_TIMEOUT_S = 1800


_SKIPPED: list[str] = []


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test gets the long timeout (its module's server may start in its setup)."""
    for item in items:
        item.add_marker(pytest.mark.timeout(TEST_TIMEOUT_S))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Remember every skip and xfail: they fail the session."""
    if report.skipped:
        _SKIPPED.append(report.nodeid)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A session with skips fails, loudly."""
    if _SKIPPED and exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    if _SKIPPED:
        print(f"\nconformance: FAILED: {len(_SKIPPED)} skipped test(s): {', '.join(_SKIPPED)}")


def _run_dir() -> Path:
    """``$NARWHAL_CONFORMANCE_RUN_DIR``, else a new ``.conformance/runs/<UTC time>`` (once)."""
    given = os.environ.get(RUN_DIR_ENV)
    if not given:
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        given = str(REPO / ".conformance" / "runs" / stamp)
        os.environ[RUN_DIR_ENV] = given  # the vLLM and the Dynamo fixtures share one folder
    run_dir = Path(given)
    run_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    return run_dir


def _save(state: Conformance) -> None:
    """Merge the session's figures into ``results.json``."""
    path = state.run_dir / "results.json"
    old = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    old.update(state.results)
    path.write_text(json.dumps(old, indent=2, sort_keys=True) + "\n", encoding="utf-8")


@pytest.fixture(scope="session")
def conformance() -> Iterator[Conformance]:
    """The venv (installed or reused), the model folder and the run folder."""
    run_dir = _run_dir()
    venv = ensure_venv(default_venv(REPO), run_dir / "install.log")
    model = os.environ.get(MODEL_ENV)
    model_dir = Path(model) if model else run_dir / "model"
    if not model:
        build_model(venv.python, model_dir)
    state = Conformance(run_dir=run_dir, python=venv.python, model_dir=model_dir)
    yield state
    _save(state)


@pytest.fixture(scope="session")
def dynamo() -> Iterator[Conformance]:
    """The Dynamo tier's state: the Dynamo venv's interpreter (installed or reused; ``run.py``
    has done it already) and the simulator's model folder, in the same run folder. Needs neither
    the vLLM venv nor its model."""
    run_dir = _run_dir()
    venv = ensure_dynamo_venv(default_dynamo_venv(), run_dir / "dynamo-install.log")
    simulator = REPO / ".venv" / "bin" / "narwhal-sim"
    model_dir = build_model_folder(run_dir / "dynamo" / "model", simulator)
    state = Conformance(run_dir=run_dir, python=venv.python, model_dir=model_dir)
    state.record(
        "dynamo",
        venv=str(venv.folder),
        venv_check_s=round(venv.wall_s, 1),
        venv_installed_here=venv.installed,
        versions=venv.versions,
    )
    yield state
    _save(state)


@pytest.fixture(scope="session")
def wheels() -> Wheels:
    """Every package's wheel, ``uv build --all-packages`` into the run folder's ``wheels/``, once
    per session (log ``wheels-build.log``)."""
    run_dir = _run_dir()
    return build_wheels(run_dir / "wheels", run_dir / "wheels-build.log")
