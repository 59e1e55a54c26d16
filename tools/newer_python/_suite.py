"""What the newer-Python tier puts in the root and runs there.

The run folder is ``ROOT/narwhal`` (``/narwhal`` in the chroot), emptied at the start of each run:

- ``wheels/``: every package's wheel, ``uv build --all-packages -o`` from the checkout with the uv
  the Makefile uses (``$UV``, else ``uv`` on PATH, else ``.tools/uv/bin/uv``);
- ``repo/``: what the tests read from a checkout and nothing importable: ``tests/``,
  ``tools/measurement/`` (the trial tests' launcher), ``examples/``, the root ``pyproject.toml``
  (the pytest settings: ``filterwarnings = ["error"]``, ``--import-mode=importlib``, the per-test
  timeout) and ``README.md`` (examples the tests hold it to), and each package's folder WITHOUT
  ``src/`` (READMEs, schemas), so every ``narwhal_*`` import resolves to the installed wheels;
- ``venv/``: a fresh venv of the root's ``python3`` with the seven wheels installed as files and
  the test dependencies (the lower bounds of the root ``pyproject.toml``'s ``dev`` group, less the
  linters) from the package index, binary wheels only;
- ``build.log``, ``pip.log``, ``pytest.log``, ``junit.xml`` and ``results.json``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import tomllib
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..makefile_uv import find_uv
from ._root import RootError, chroot_env, in_root, kill_group, logged, tail

REPO = Path(__file__).resolve().parents[2]
#: The run folder, as the chroot sees it.
IN_ROOT = "/narwhal"
#: The test folders the tier runs under the newer Python (every package's), less ``LEFT_OUT``.
TESTS = (
    "tests/engine_client",
    "tests/fit",
    "tests/store",
    "tests/sim",
    "tests/trial",
    "tests/report",
    "tests/profile",
)
#: The slowest end-to-end files (under 3.13 on 2 shared cores: about 590 of the 830 s these
#: folders take, the demo's 100 s included), left to ``make test`` on 3.11 so the tier keeps to
#: about 3.5 minutes of tests. What stays covers every command end to end at least once: the
#: trial's run on each event loop, ``check`` and its faults, every CLI's options,
#: ``narwhal-profile`` sweeps (chunked streams, two shards merged), the report's page, the
#: simulator. ``tests/workspace`` builds and lints the checkout itself and is not run here.
LEFT_OUT = (
    "tests/trial/test_trial_demo.py",  # tools/demo.py: the whole demo, about 100 s
    "tests/trial/test_trial_e2e_trace.py",
    "tests/trial/test_trial_e2e_dynamo.py",
    "tests/trial/test_trial_predict_e2e.py",
    "tests/trial/test_trial_access.py",
    "tests/trial/test_trial_predict.py",
    "tests/trial/test_trial_edge_command.py",
    "tests/trial/test_trial_e2e_keepalive.py",
    "tests/trial/test_trial_predict_schedule.py",
    "tests/trial/test_trial_e2e_server.py",
    "tests/trial/test_trial_edge_e2e.py",
    "tests/trial/test_trial_e2e_keys.py",
    "tests/trial/test_trial_predict_spread.py",
    "tests/profile/test_profile_e2e_sweep.py",
    "tests/profile/test_profile_e2e_aborts.py",
    "tests/profile/test_profile_fidelity.py",
    "tests/profile/test_modes_colocated.py",
    "tests/profile/test_profile_parallel.py",
    "tests/profile/test_profile_shard_auto.py",
    "tests/profile/test_profile_mixing.py",
    "tests/profile/test_profile_keepalive.py",
    "tests/profile/test_modes_merge.py",
)
#: Single tests that need code of the checkout the tier does not copy: the comparison page's
#: screenshot drives the conformance tier's Chromium helper (``tools/conformance/_browser.py``).
#: ``make test`` runs them on 3.11.
DESELECTED = ("tests/report/test_report_compare.py::test_chromium_draws_the_page",)
#: The tests' own subprocesses (the commands, the simulator) turn deprecations into errors too:
#: pytest's ``filterwarnings`` reaches only its own process.
WARNINGS = "error::DeprecationWarning,error::PendingDeprecationWarning"
#: From the root pyproject's dev group: the linters are not test dependencies.
NOT_FOR_TESTS = frozenset({"mypy", "ruff"})
#: Copied from the checkout (besides each package's folder less its sources).
COPIED = ("tests", "tools/measurement", "examples")
SKIP_NAMES = ("__pycache__", "*.pyc", ".pytest_cache", ".hypothesis")
BUILD_TIMEOUT_S = 10 * 60
PIP_TIMEOUT_S = 30 * 60
PYTEST_TIMEOUT_S = 30 * 60
#: Variables that would put something other than the venv's own packages on a Python's path.
PATH_VARS = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE", "VIRTUAL_ENV")
#: Where the host's CA bundle goes (a host that reaches the index through a TLS-inspecting proxy
#: trusts a CA the root's own bundle does not have).
CA_NAME = "host-ca-certificates.crt"
VERSIONS_SHOWN = ("numpy", "scipy", "pydantic", "httpx", "orjson", "matplotlib", "pytest")


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass
class Run:
    """One run's folder (host side) and the root it lives in."""

    root: Path

    @property
    def folder(self) -> Path:
        """``ROOT/narwhal`` on the host."""
        return self.root / IN_ROOT.lstrip("/")

    def host(self, inside: str) -> Path:
        """The host path of a path in the root."""
        return self.root / inside.lstrip("/")

    def reset(self) -> None:
        """Empty the run folder (what an earlier run left)."""
        if self.folder.exists():
            shutil.rmtree(self.folder)
        self.folder.mkdir(mode=0o755)


def package_dirs() -> list[Path]:
    """Every workspace member's folder."""
    return sorted(p.parent for p in (REPO / "packages").glob("*/pyproject.toml"))


def build_wheels(run: Run) -> list[str]:
    """``uv build --all-packages -o ROOT/narwhal/wheels``; the wheels' paths in the root (one per
    member, or RootError)."""
    out = run.folder / "wheels"
    env = {k: v for k, v in os.environ.items() if k not in PATH_VARS}
    env.setdefault("UV_PYTHON_DOWNLOADS", "never")  # what the Makefile exports
    env.setdefault("UV_PYTHON", "python3")
    log = run.folder / "build.log"
    try:
        uv = find_uv()
    except FileNotFoundError as exc:
        raise RootError(str(exc)) from exc
    argv = [str(uv), "build", "--all-packages", "-o", str(out)]
    logged(argv, log, "uv build --all-packages", BUILD_TIMEOUT_S, env, cwd=REPO)
    wheels = sorted(out.glob("*.whl"))
    names = {_canonical(w.name.split("-", 1)[0]) for w in wheels}
    missing = [p.name for p in package_dirs() if _canonical(p.name) not in names]
    if missing:
        raise RootError(f"uv build wrote no wheel for {', '.join(missing)}; log tail:\n{tail(log)}")
    return [f"{IN_ROOT}/wheels/{w.name}" for w in wheels]


def copy_checkout(run: Run) -> int:
    """Copy what the tests read into ``ROOT/narwhal/repo`` (no package's ``src/``); the files."""
    dest = run.folder / "repo"
    skip = shutil.ignore_patterns(*SKIP_NAMES)
    for name in COPIED:
        shutil.copytree(REPO / name, dest / name, ignore=skip)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, dest / name)
    for member in package_dirs():

        def no_sources(folder: str, names: list[str], top: str = str(member)) -> set[str]:
            left = set(skip(folder, names))
            return left | {"src"} if folder == top else left

        shutil.copytree(member, dest / "packages" / member.name, ignore=no_sources)
    return sum(1 for p in dest.rglob("*") if p.is_file())


def prepare_root(run: Run) -> list[str]:
    """The host's ``/etc/resolv.conf`` into the root (for pip) and the host's CA bundle into the
    run folder; the pip environment that uses it."""
    resolv = run.root / "etc" / "resolv.conf"
    if resolv.is_symlink() or resolv.exists():
        resolv.unlink()
    shutil.copyfile("/etc/resolv.conf", resolv)
    notes = ["/etc/resolv.conf"]
    for candidate in (
        os.environ.get("PIP_CERT", ""),
        os.environ.get("SSL_CERT_FILE", ""),
        "/etc/ssl/certs/ca-certificates.crt",
    ):
        if candidate and Path(candidate).is_file():
            shutil.copyfile(candidate, run.folder / CA_NAME)
            notes.append(f"CA bundle {candidate}")
            break
    return notes


def _pip_env(run: Run) -> dict[str, str]:
    extra = {"PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1"}
    if (run.folder / CA_NAME).is_file():
        bundle = f"{IN_ROOT}/{CA_NAME}"
        extra |= {"PIP_CERT": bundle, "SSL_CERT_FILE": bundle, "REQUESTS_CA_BUNDLE": bundle}
    return chroot_env(extra)


def test_requirements() -> list[str]:
    """The root pyproject's ``dev`` group (its lower bounds) less the linters."""
    doc = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    group: list[str] = doc["dependency-groups"]["dev"]
    out = []
    for spec in group:
        match = re.match(r"[A-Za-z0-9_.-]+", spec)
        if match and _canonical(match.group(0)) not in NOT_FOR_TESTS:
            out.append(spec)
    return out


_IMPORTS = """
import importlib, json, sys
names = sys.argv[1:]
print(json.dumps({n: importlib.import_module(n).__file__ for n in names}))
"""


@dataclass
class Installed:
    """What pip put in the venv."""

    python: str
    versions: dict[str, str] = field(default_factory=dict)
    modules: dict[str, str] = field(default_factory=dict)


def install(run: Run, wheels: Sequence[str]) -> Installed:
    """A fresh venv of the root's ``python3``; the wheels (as files) and the test dependencies
    installed by pip; every ``narwhal_*`` module checked to come from the venv."""
    log = run.folder / "pip.log"
    env = _pip_env(run)
    venv = f"{IN_ROOT}/venv"
    python = f"{venv}/bin/python"
    logged(in_root(run.root, IN_ROOT, ["python3", "-m", "venv", venv]), log, "venv", 300, env)
    argv = [python, "-m", "pip", "install", "--only-binary=:all:", *wheels, *test_requirements()]
    logged(in_root(run.root, IN_ROOT, argv), log, "pip install", PIP_TIMEOUT_S, env)
    freeze = subprocess.run(
        in_root(run.root, IN_ROOT, [python, "-m", "pip", "freeze", "--all"]),
        capture_output=True, text=True, check=False, env=env, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    with log.open("a", encoding="utf-8") as out:
        out.write(f"$ pip freeze --all\n{freeze.stdout}{freeze.stderr}\n")
    versions = {}
    for line in freeze.stdout.splitlines():
        name, sep, version = line.partition("==")
        if sep:
            versions[_canonical(name)] = version.strip()
    modules = [n.name.replace("-", "_") for n in package_dirs()]
    probe = subprocess.run(
        in_root(run.root, "/", [python, "-c", _IMPORTS, *modules]),
        capture_output=True, text=True, check=False, env=env, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    if probe.returncode != 0:
        raise RootError(f"the installed packages do not import: {probe.stderr.strip()[-3000:]}")
    found: dict[str, str] = json.loads(probe.stdout.strip().splitlines()[-1])
    stray = {m: f for m, f in found.items() if not f.startswith(f"{venv}/lib/")}
    if stray:
        raise RootError(f"not imported from the venv: {stray}")
    version = subprocess.run(
        in_root(run.root, "/", [python, "-c", "import sys; print(sys.version.split()[0])"]),
        capture_output=True, text=True, check=False, env=env, stdin=subprocess.DEVNULL,
    ).stdout.strip()  # fmt: skip
    return Installed(version, versions, found)


@dataclass
class Outcome:
    """What the test run came to."""

    exit_code: int
    tests: int = 0
    failures: int = 0
    errors: int = 0
    skipped: int = 0
    wall_s: float = 0.0
    bad: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        """Exit 0, tests ran, none failed, errored or was skipped (an xfail counts as a skip)."""
        return (
            self.exit_code == 0
            and self.tests > 0
            and self.failures == 0
            and self.errors == 0
            and self.skipped == 0
        )


def selection() -> tuple[list[str], list[str]]:
    """pytest's arguments for ``TESTS`` less ``LEFT_OUT`` and ``DESELECTED``, and the left-out
    files that no longer exist (a stale entry only means more tests run)."""
    stale = [path for path in LEFT_OUT if not (REPO / path).is_file()]
    stale += [node for node in DESELECTED if not (REPO / node.partition("::")[0]).is_file()]
    return [
        *TESTS,
        *(f"--ignore={path}" for path in LEFT_OUT),
        *(f"--deselect={node}" for node in DESELECTED),
    ], stale


def run_tests(run: Run, selected: Sequence[str], extra: Sequence[str]) -> Outcome:
    """pytest in the venv over ``selected`` with the root pyproject's settings (and deprecations
    errors in the tests' subprocesses too); output to the console and ``pytest.log``; counts from
    ``junit.xml``."""
    repo = f"{IN_ROOT}/repo"
    argv = [
        f"{IN_ROOT}/venv/bin/pytest",
        "-c", f"{repo}/pyproject.toml",
        "--rootdir", repo,
        "-p", "no:cacheprovider",
        f"--junitxml={IN_ROOT}/junit.xml",
        f"--basetemp={IN_ROOT}/tmp",
        "--durations=15",
        *selected,
        *extra,
    ]  # fmt: skip
    log = run.folder / "pytest.log"
    start = time.monotonic()
    with log.open("w", encoding="utf-8") as out:
        out.write(f"$ {' '.join(argv)}\n")
        proc = subprocess.Popen(
            in_root(run.root, repo, argv),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=chroot_env({"PYTHONWARNINGS": WARNINGS}),
            text=True,
            start_new_session=True,
        )
        watchdog = threading.Timer(PYTEST_TIMEOUT_S, kill_group, args=(proc,))
        watchdog.start()
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                out.write(line)
                sys.stdout.write(line)
                sys.stdout.flush()
            code = proc.wait()
        except BaseException:
            kill_group(proc)
            raise
        finally:
            watchdog.cancel()
    outcome = Outcome(exit_code=code, wall_s=time.monotonic() - start)
    if code == -signal.SIGKILL:
        outcome.bad.append(f"pytest killed after {PYTEST_TIMEOUT_S} s")
    _count(run.folder / "junit.xml", outcome)
    return outcome


def _count(junit: Path, outcome: Outcome) -> None:
    if not junit.is_file():
        outcome.bad.append("pytest wrote no junit.xml")
        return
    tree = ET.parse(junit)
    for suite in tree.getroot().iter("testsuite"):
        outcome.tests += int(suite.get("tests", "0"))
        outcome.failures += int(suite.get("failures", "0"))
        outcome.errors += int(suite.get("errors", "0"))
        outcome.skipped += int(suite.get("skipped", "0"))
    for case in tree.getroot().iter("testcase"):
        for kind in ("failure", "error", "skipped"):
            if case.find(kind) is not None:
                name = f"{case.get('classname', '')}::{case.get('name', '')}"
                outcome.bad.append(f"{kind}: {name}")


def shown_versions(installed: Installed) -> str:
    """The interesting resolved versions, one line."""
    pairs = [f"{n} {installed.versions[n]}" for n in VERSIONS_SHOWN if n in installed.versions]
    return ", ".join(pairs)


def write_results(run: Run, doc: dict[str, object]) -> Path:
    """``results.json`` in the run folder."""
    path = run.folder / "results.json"
    path.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return path
