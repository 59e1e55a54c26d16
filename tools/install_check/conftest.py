"""Fixtures of the install tier: a copy of the checkout with the README's build line run in it
(once per session), and the simulated engines the installed commands run against.

Run through ``make install-check`` (``python -m tools.install_check.run``) or directly
(``.venv/bin/pytest tools/install_check -p no:cacheprovider``). A skipped or xfailed test fails
the session: this tier never skips.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ._checkout import Checkout, build_checkout
from ._services import Services

#: Per-test limit: a block on a cold cache downloads its third-party wheels first.
TEST_TIMEOUT_S = 1800

_SKIPPED: list[str] = []
_TIMES = pytest.StashKey[list[str]]()


def pytest_configure(config: pytest.Config) -> None:
    """A list for each block's timing line (``timings``), printed at the end."""
    config.stash[_TIMES] = []


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> None:
    """Each block's install and check times, where the blocks are."""
    lines = config.stash.get(_TIMES, [])
    if lines:
        terminalreporter.section("install blocks")
        for line in lines:
            terminalreporter.write_line(line)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test gets the long timeout."""
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
        print(f"\ninstall-check: FAILED: {len(_SKIPPED)} skipped test(s): {', '.join(_SKIPPED)}")


@pytest.fixture(scope="session")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Checkout:
    """The checkout copied out of the workspace, the README's build line run in it."""
    return build_checkout(tmp_path_factory.mktemp("checkout"))


@pytest.fixture(scope="session")
def services(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Services]:
    """The simulated engines and the report's inputs, started on first use."""
    started = Services(tmp_path_factory.mktemp("services"))
    yield started
    started.close()


@pytest.fixture
def timings(request: pytest.FixtureRequest) -> list[str]:
    """Where a test adds its timing line (printed after the session)."""
    return request.config.stash[_TIMES]
