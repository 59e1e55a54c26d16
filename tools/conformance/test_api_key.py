"""vLLM's server with an API key: every command sends the bearer key (the profile through the
fleet entry's ``api_key_env``; the trial's ``prepare`` and ``run`` through ``--api-key-env`` and
its default variable ``NARWHAL_API_KEY``; ``check`` through the fleet), and the key is never
written to any file or output."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from . import _commands as cmd
from ._checks import SuiteChecks
from ._server import SERVED_MODEL
from ._state import Conformance
from ._suite import IID, Suite, run_suite, write_transcript

VARIANT = "api-key"
#: Named in the fleet file and passed to prepare with --api-key-env.
KEY_VAR = "NARWHAL_CONFORMANCE_KEY"
#: The trial's default key variable (``run`` relies on it: no flag).
DEFAULT_KEY_VAR = "NARWHAL_API_KEY"


@pytest.fixture(scope="module")
def key() -> str:
    """A fresh key for this module; it lives only in this process and the subprocess envs."""
    return f"nwk-{secrets.token_urlsafe(24)}"


@pytest.fixture(scope="module")
def suite(conformance: Conformance, key: str) -> Iterator[Suite]:
    """The key server (key in vLLM's VLLM_API_KEY, never on a command line) and the commands."""
    with conformance.server(VARIANT, secret_env={"VLLM_API_KEY": key}) as server:
        done = run_suite(
            VARIANT,
            server,
            conformance.folder(VARIANT),
            env={KEY_VAR: key, DEFAULT_KEY_VAR: key},
            api_key=key,
            fleet_key_env=KEY_VAR,
            prepare_extra=("--api-key-env", KEY_VAR),
        )
        without = cmd.write_fleet(
            done.root / "no-key", server.url, iid=IID, model=SERVED_MODEL, api_key_env=None
        )
        done.extra_done.append(cmd.profile("--fleet", without, "--format", "json"))
        yield done
        write_transcript(done)
        conformance.record(
            VARIANT,
            profile_exit=done.profile.returncode,
            prepare_exit=done.prepare.returncode,
            run_exit=done.run.returncode,
            check_exit=done.check.returncode,
        )


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink())


class TestApiKey(SuiteChecks):
    """Every protocol truth behind a key, and the key's safety."""

    def test_the_server_demands_the_key(self, suite: Suite) -> None:
        """Without the key /v1/models is 401; with it, 200."""
        url = f"{suite.server.url}/v1/models"
        assert cmd.get_status(url, {}) == 401
        assert cmd.get_status(url, suite.headers) == 200

    def test_a_profile_without_the_key_is_refused(self, suite: Suite) -> None:
        """The same sweep without api_key_env fails on the 401: so the successful profile sent
        the key."""
        done = suite.extra_done[0]
        result = done.json()
        assert done.returncode == 1 and result["ok"] is False, done.brief()
        assert "401" in result["error"]["message"], done.brief()

    def test_key_never_written(self, suite: Suite) -> None:
        """No file in the variant's folder (fleet, store, sidecar, workload, trial records,
        launch record, server log) and no captured stdout/stderr holds the key."""
        key = suite.api_key
        assert key
        files = _files(suite.root)
        expected = [
            suite.fleet,
            suite.launch_record,
            suite.store,
            suite.sidecar,
            suite.workload,
            *(suite.run_dir / name for name in ("manifest.json", "requests.jsonl", "summary.json")),
            suite.server.log,
        ]
        missing = [str(p.relative_to(suite.root)) for p in expected if p not in files]
        assert not missing, f"cannot scan files that were never written: {missing}"
        leaked = [str(p) for p in files if key.encode() in p.read_bytes()]
        outputs = [
            f"{' '.join(d.argv[:3])}: {stream}"
            for d in suite.outputs()
            for stream, text in (("stdout", d.stdout), ("stderr", d.stderr))
            if key in text
        ]
        on_command_line = key in " ".join(suite.server.argv)
        in_launch_record = key in suite.launch_record.read_text(encoding="utf-8")
        # Booleans and names only: an assertion message must never show the key itself.
        assert not leaked, f"key found in files {leaked}"
        assert not outputs, f"key found in outputs {outputs}"
        assert not on_command_line, "key on the server's command line"
        assert not in_launch_record, "key in the launch record"
