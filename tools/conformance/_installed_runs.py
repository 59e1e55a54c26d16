"""Our commands installed into an engine's own venv and run from there, as an operator runs them.

Into vLLM's venv (``narwhal-trial``, ``narwhal-profile-cli``, ``narwhal-report`` and their narwhal
dependencies, as wheel files) against the default variant's server: a small ``narwhal-profile``
sweep, the trial's ``prepare``, ``run`` (16 requests at 2/s), ``check`` and ``predict`` (from that
profile), and ``narwhal-report`` over the store and the run. Into Dynamo's venv (``narwhal-trial``
with its ``tokenizer`` extra, and its narwhal dependencies) through the frontend: ``prepare
--tokenizer``, ``run --drain-preset dynamo`` and ``check``.

Every command is the venv's own entry point (``VENV/bin/narwhal-trial``...), run from an empty
folder with a clean environment (PATH without the checkout's folders, no ``PYTHONPATH``), and
first of all the venv's interpreter says where it imports our packages from. The packages come
out of the venv again before the fixture returns (``_installed.installed``); the tests assert on
what was kept here.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import _commands as cmd
from ._dynamo import MAX_MODEL_LEN as DYNAMO_MAX_MODEL_LEN
from ._dynamo import DynamoStack
from ._dynamo_suite import BOUNDS as DYNAMO_BOUNDS
from ._dynamo_suite import INPUT_TOKENS as DYNAMO_INPUT_TOKENS
from ._dynamo_suite import OUTPUT_TOKENS as DYNAMO_OUTPUT_TOKENS
from ._dynamo_suite import SEED as DYNAMO_SEED
from ._dynamo_suite import frontend_fleet
from ._installed import REPO, Install, Wheels, installed
from ._server import SERVED_MODEL
from ._suite import (
    DRAIN_GAUGES,
    ENGINE_CONTRACT,
    IID,
    TRIAL_BOUNDS,
    TRIAL_SEED,
    Shape,
    Suite,
    trial_args,
)

#: Our distributions every installing venv gets as wheel files beside the command's own.
NARWHAL_DEPS = ("narwhal-engine-client", "narwhal-fit", "narwhal-store")
VLLM_DISTS = ("narwhal-trial", "narwhal-profile-cli", "narwhal-report", *NARWHAL_DEPS)
DYNAMO_DISTS = ("narwhal-trial", *NARWHAL_DEPS)
#: ``prepare --tokenizer`` needs the ``tokenizers`` package, which the mocker's venv lacks.
DYNAMO_EXTRAS = {"narwhal-trial": "tokenizer"}
#: The import names of the distributions, for the where-from probe.
MODULES = {
    "narwhal-trial": "narwhal_trial",
    "narwhal-profile-cli": "narwhal_profile_cli",
    "narwhal-report": "narwhal_report",
    "narwhal-engine-client": "narwhal_engine_client",
    "narwhal-fit": "narwhal_fit",
    "narwhal-store": "narwhal_store",
}
#: Our entry points and the distribution of each.
SCRIPTS = {
    "narwhal-trial": "narwhal-trial",
    "narwhal-profile": "narwhal-profile-cli",
    "narwhal-report": "narwhal-report",
}
#: The smallest sweep the profiler accepts (three prefill lengths repeated three times, two
#: decode lengths at two concurrencies), with 192-token streams twice (a stream delivered in a
#: burst leaves its cohort untimed; the fit needs one valid cohort per point). The trial's
#: 256 + 16 tokens lie inside both fits' domains, for ``check`` and ``predict``.
SHAPE = Shape((128, 256, 512), (128, 256), (1, 4), 192, 3, 2, 256, 16)
REQUESTS = 16
RATE = "2"
#: The loop ``run --loop auto`` must pick in an engine's venv (both have uvloop).
EXPECTED_LOOP = "uvloop"
_WHERE = """
import importlib, json, sys
modules = {name: importlib.import_module(name).__file__ for name in sys.argv[1:]}
print(json.dumps({"modules": modules, "path": sys.path, "executable": sys.executable}))
"""


def clean_env() -> dict[str, str]:
    """PATH without any folder of the checkout (``_commands.run`` adds HOME, LANG, TMPDIR)."""
    parts = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p]
    kept = [p for p in parts if not _inside(Path(p), REPO)]
    return {"PATH": os.pathsep.join(kept or ["/usr/bin:/bin"])}


def _inside(path: Path, folder: Path) -> bool:
    try:
        return path.resolve().is_relative_to(folder.resolve())
    except OSError:
        return False


@dataclass
class InstalledRun:
    """One venv's install and every command run from it."""

    install: Install
    folder: Path
    wheels: Wheels
    done: dict[str, cmd.Done] = field(default_factory=dict)
    #: The first lines of each installed entry point, read while it was there.
    scripts: dict[str, list[str]] = field(default_factory=dict)

    @property
    def venv(self) -> Path:
        """The engine's venv."""
        return self.install.venv

    @property
    def cwd(self) -> Path:
        """The empty folder every command runs in."""
        return self.folder / "cwd"

    @property
    def store(self) -> Path:
        """The profile store (vLLM) or the empty accepted store (Dynamo)."""
        return self.folder / "profiles" / "fleet-profiles.json"

    @property
    def workload(self) -> Path:
        """``prepare``'s workload."""
        return self.folder / "trial" / "workload" / "workload.json"

    @property
    def run_dir(self) -> Path:
        """``run``'s record folder."""
        return self.folder / "trial" / "run"

    def command(self, name: str, *args: str | Path) -> cmd.Done:
        """``VENV/bin/NAME ARGS`` from the empty folder, with the clean environment; kept."""
        argv = [str(self.venv / "bin" / name), *map(str, args)]
        done = cmd.run(argv, env=clean_env(), cwd=self.cwd)
        self.done[f"{name} {args[0]}" if name == "narwhal-trial" else name] = done
        return done

    def where(self) -> cmd.Done:
        """The venv's interpreter imports every installed distribution and says from where."""
        modules = [MODULES[d] for d in self.install.dists]
        argv = [str(self.install.python), "-c", _WHERE, *modules]
        done = cmd.run(argv, env=clean_env(), cwd=self.cwd)
        self.done["where"] = done
        for name, dist in SCRIPTS.items():
            script = self.venv / "bin" / name
            if dist in self.install.dists and script.is_file():
                self.scripts[name] = script.read_text(encoding="utf-8").splitlines()[:3]
        return done

    def get(self, key: str) -> cmd.Done:
        """A command that ran (fails naming the ones that did when it did not)."""
        assert key in self.done, f"{key} did not run; ran: {', '.join(self.done)}"
        return self.done[key]

    def summary(self) -> dict[str, Any]:
        """``run``'s summary.json (fails naming run's outcome when missing)."""
        path = self.run_dir / "summary.json"
        assert path.is_file(), f"no summary.json\n{self.get('narwhal-trial run').brief()}"
        return cmd.read_json(path)

    def manifest(self) -> dict[str, Any]:
        """``run``'s manifest.json."""
        path = self.run_dir / "manifest.json"
        assert path.is_file(), f"no manifest.json\n{self.get('narwhal-trial run').brief()}"
        return cmd.read_json(path)

    def write_transcript(self) -> Path:
        """Every command's argv, exit code and outputs into ``commands.log``."""
        path = self.folder / "commands.log"
        text = "\n\n".join(d.brief(limit=1_000_000) for d in self.done.values())
        path.write_text(text + "\n", encoding="utf-8")
        path.chmod(0o600)
        return path

    def figures(self) -> dict[str, Any]:
        """The install, the wall times, the loop the run used and its summary's figures."""
        out: dict[str, Any] = {
            "wheels_build_wall_s": round(self.wheels.wall_s, 1),
            **self.install.figures(),
            "commands": {
                key: {"exit": d.returncode, "wall_s": round(d.wall_s, 1)}
                for key, d in self.done.items()
            },
        }
        manifest = self.run_dir / "manifest.json"
        if manifest.is_file():
            out["event_loop"] = cmd.read_json(manifest).get("event_loop")
        summary = self.run_dir / "summary.json"
        if summary.is_file():
            doc = cmd.read_json(summary)
            out["trial"] = {
                k: doc.get(k)
                for k in (
                    "requests", "sent", "counts", "good", "attainment", "pass",
                    "client_schedule_valid", "max_lag_s", "achieved_rate", "exit_code", "error",
                )
            }  # fmt: skip
            out["trial"]["ttft_p50_s"] = (doc.get("ttft_s") or {}).get("p50")
            out["trial"]["tpot_p50_s"] = (doc.get("tpot_s") or {}).get("p50")
        return out


def _run_trial(run: InstalledRun, base: str, flags: tuple[str, ...]) -> cmd.Done:
    """``run --loop auto`` (uvloop, which the engine's venv has) of ``REQUESTS`` at ``RATE`` with
    ``flags`` (bounds, drain gauges, limits)."""
    return run.command(
        "narwhal-trial", "run", "--base", base, "--workload", run.workload, "--loop", "auto",
        "--rate", RATE, "--requests", str(REQUESTS), *flags, "--out", run.run_dir,
    )  # fmt: skip


def run_in_vllm_venv(
    suite: Suite, venv: Path, wheels: Wheels, folder: Path, limits: Path
) -> InstalledRun:
    """Install into vLLM's venv, run every command against the suite's server, take them out."""
    with installed(venv, wheels, VLLM_DISTS, folder) as install:
        run = InstalledRun(install, folder, wheels)
        run.cwd.mkdir(mode=0o700, exist_ok=True)
        try:
            _vllm_commands(run, suite, limits)
        finally:
            run.write_transcript()
    return run


def _vllm_commands(run: InstalledRun, suite: Suite, limits: Path) -> None:
    run.where()
    fleet = cmd.write_fleet(
        run.folder, suite.server.url, iid=IID, model=SERVED_MODEL, contract=ENGINE_CONTRACT
    )
    run.command(
        "narwhal-profile", "--fleet", fleet, *SHAPE.sweep_args(), "--limits", limits,
        "--format", "json",
    )  # fmt: skip
    run.command(
        "narwhal-trial", "prepare", *trial_args(suite.server),
        "--input-tokens", str(SHAPE.trial_input), "--output-tokens", str(SHAPE.trial_output),
        "--seed", str(TRIAL_SEED), "--out", run.workload.parent,
    )  # fmt: skip
    gauges = tuple(arg for gauge in DRAIN_GAUGES for arg in ("--drain-gauge", gauge))
    _run_trial(run, suite.server.url, (*TRIAL_BOUNDS, *gauges))
    run.command(
        "narwhal-trial", "check", "--workload", run.workload, "--fleet", fleet,
        "--profiles", run.store, "--launch-record", suite.launch_record,
    )  # fmt: skip
    run.command(
        "narwhal-trial", "predict", "--fleet", fleet, "--profiles", run.store,
        "--limits", limits, "--input-tokens", str(SHAPE.trial_input),
        "--output-tokens", str(SHAPE.trial_output), "--requests", str(REQUESTS),
        "--rate", RATE, *TRIAL_BOUNDS[:6], "--json",
    )  # fmt: skip
    run.command("narwhal-report", run.store, run.run_dir, "--out", run.folder / "report.html")


def run_in_dynamo_venv(
    stack: DynamoStack, venv: Path, wheels: Wheels, folder: Path
) -> InstalledRun:
    """Install the trial into Dynamo's venv, run it through the frontend, take it out."""
    with installed(venv, wheels, DYNAMO_DISTS, folder, DYNAMO_EXTRAS) as install:
        run = InstalledRun(install, folder, wheels)
        run.cwd.mkdir(mode=0o700, exist_ok=True)
        try:
            _dynamo_commands(run, stack)
        finally:
            run.write_transcript()
    return run


def _dynamo_commands(run: InstalledRun, stack: DynamoStack) -> None:
    run.where()
    limit = ("--max-model-len", str(DYNAMO_MAX_MODEL_LEN))
    run.command(
        "narwhal-trial", "prepare", "--base", stack.url,
        "--input-tokens", str(DYNAMO_INPUT_TOKENS), "--output-tokens", str(DYNAMO_OUTPUT_TOKENS),
        "--seed", str(DYNAMO_SEED), "--tokenizer", stack.model_dir, *limit,
        "--out", run.workload.parent,
    )  # fmt: skip
    _run_trial(run, stack.url, (*DYNAMO_BOUNDS, "--drain-preset", "dynamo", *limit))
    fleet, store = frontend_fleet(stack, run.folder)
    assert store == run.store, (store, run.store)
    run.command(
        "narwhal-trial", "check", "--workload", run.workload, "--fleet", fleet,
        "--profiles", store, *limit,
    )  # fmt: skip


# --- what both venvs must show ---------------------------------------------------------------


def assert_no_version_changed(install: Install) -> None:
    """pip changed no version of a package the venv had: a change is a pin conflict, ours to
    fix by loosening a lower bound to an honest one."""
    assert not install.changed, (
        f"installing our wheels into {install.venv} changed what the engine had installed "
        f"(pin conflict): {'; '.join(install.conflicts())}; see {install.log}"
    )
    assert sorted(install.narwhal) == sorted(install.dists), install.narwhal


def assert_runs_from_the_venv(run: InstalledRun) -> None:
    """Every distribution imports from the venv, nothing of the checkout is on the path, and
    the entry points are the venv's own scripts on its interpreter."""
    done = run.get("where")
    assert done.returncode == 0, done.brief()
    doc = json.loads(done.stdout.strip().splitlines()[-1])
    for module, where in doc["modules"].items():
        assert _inside(Path(where), run.venv), f"{module} imported from {where}, not {run.venv}"
    on_path = [p for p in doc["path"] if p and _inside(Path(p), REPO)]
    assert all(_inside(Path(p), run.venv) for p in on_path), f"the checkout on sys.path: {on_path}"
    scripts = [name for name, dist in SCRIPTS.items() if dist in run.install.dists]
    assert sorted(run.scripts) == sorted(scripts), f"entry points missing: {run.scripts}"
    for name, head in run.scripts.items():
        assert any(str(run.install.python) in line for line in head), (name, head)


def assert_trial_ran(run: InstalledRun, output_tokens: int) -> None:
    """prepare exit 0; run exit 0 or 2 with every request sent and completed with its output
    tokens, no error; the manifest records uvloop, which ``--loop auto`` found there."""
    prepare = run.get("narwhal-trial prepare")
    assert prepare.returncode == 0, prepare.brief()
    done = run.get("narwhal-trial run")
    assert done.returncode in (0, 2), done.brief()
    summary = run.summary()
    assert summary["error"] is None, (summary["error"], done.brief())
    assert summary["sent"] == REQUESTS, (summary["sent"], done.brief())
    assert summary["counts"]["completed"] == REQUESTS, (summary["counts"], done.brief())
    records = cmd.read_jsonl(run.run_dir / "requests.jsonl")
    assert len(records) == REQUESTS, done.brief()
    assert all(r["completion_tokens"] == output_tokens for r in records), records
    assert run.manifest().get("event_loop") == EXPECTED_LOOP, run.manifest().get("event_loop")


def assert_left_as_found(install: Install) -> None:
    """After the clean-up the venv's packages are exactly what they were before the install."""
    assert install.cleanup_error is None, install.cleanup_error
    extra = sorted(set(install.final) - set(install.before))
    gone = sorted(set(install.before) - set(install.final))
    final, before = install.final, install.before
    moved = sorted(n for n in before if n in final and final[n] != before[n])
    assert install.final == install.before, f"left behind {extra}, gone {gone}, moved {moved}"
