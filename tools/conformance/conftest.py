"""Fixtures of the conformance tier: the vLLM venv, the model folder, one server at a time.

Run through ``make conformance`` (``python -m tools.conformance.run``), which installs or reuses the
venv and builds the model first and passes them in ``NARWHAL_CONFORMANCE_*`` variables; run
directly (``.venv/bin/pytest tools/conformance -p no:cacheprovider``) it does both itself. A
skipped or xfailed test fails the session: this tier never skips silently.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

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


@pytest.fixture(scope="session")
def conformance() -> Iterator[Conformance]:
    """The venv (installed or reused), the model folder and the run folder."""
    given = os.environ.get(RUN_DIR_ENV)
    if given:
        run_dir = Path(given)
    else:
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        run_dir = REPO / ".conformance" / "runs" / stamp
    run_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    venv = ensure_venv(default_venv(REPO), run_dir / "install.log")
    model = os.environ.get(MODEL_ENV)
    model_dir = Path(model) if model else run_dir / "model"
    if not model:
        build_model(venv.python, model_dir)
    state = Conformance(run_dir=run_dir, python=venv.python, model_dir=model_dir)
    yield state
    path = run_dir / "results.json"
    old = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    old.update(state.results)
    path.write_text(json.dumps(old, indent=2, sort_keys=True) + "\n", encoding="utf-8")
