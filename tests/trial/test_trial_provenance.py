"""The run manifest's provenance: the helper digest covers every narwhal package a trial runs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import replace
from importlib import metadata
from pathlib import Path

import orjson
import pytest
from pydantic import ValidationError

from narwhal_trial import Manifest
from narwhal_trial._provenance import (
    HelperPackage,
    helper_digest,
    helper_dists,
    helper_files,
    helper_packages,
)

HELPER = ["narwhal-engine-client", "narwhal-fit", "narwhal-store", "narwhal-trial"]


def test_helper_packages_are_the_trial_and_the_narwhal_packages_it_requires() -> None:
    """narwhal-trial, the engine client (it times every request and enforces the send deadline),
    the store (it writes the records) and narwhal-fit (the store imports its form names), each at
    its installed version and where it is imported from."""
    assert helper_dists() == HELPER
    packages = helper_packages()
    assert [(p.dist, p.module) for p in packages] == [(d, d.replace("-", "_")) for d in HELPER]
    for package in packages:
        assert package.version == metadata.version(package.dist)
        assert (package.path / "__init__.py").is_file()
    files = helper_files(None, packages)
    assert {key.split("/", 1)[0] for key in files} == {p.module for p in packages}
    assert "narwhal_engine_client/__init__.py" in files and "narwhal_trial/run/_trial.py" in files


def test_every_narwhal_package_the_trial_imports_is_covered() -> None:
    """Importing every module of narwhal_trial (what any command may run) loads no narwhal package
    the digest leaves out."""
    script = (
        "import importlib, pkgutil, sys, narwhal_trial\n"
        "for m in pkgutil.walk_packages(narwhal_trial.__path__, 'narwhal_trial.'):\n"
        "    if not m.name.endswith('__main__'):  # that one runs the command\n"
        "        importlib.import_module(m.name)\n"
        "print(' '.join(sorted({n.split('.')[0] for n in sys.modules if n.startswith('narwhal')})))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.split() == [p.module for p in helper_packages()]


def _copy(package: HelperPackage, root: Path) -> HelperPackage:
    folder = root / package.module
    shutil.copytree(package.path, folder, ignore=shutil.ignore_patterns("__pycache__"))
    return replace(package, path=folder)


def test_digest_changes_when_engine_client_code_changes(tmp_path: Path) -> None:
    """An edited, added or removed engine-client source file changes the digest, and only that
    file's entry changes."""
    packages = [
        _copy(p, tmp_path) if p.module == "narwhal_engine_client" else p for p in helper_packages()
    ]
    client = next(p.path for p in packages if p.module == "narwhal_engine_client")
    before = helper_files(None, packages)
    assert before == helper_files(None)  # the copy is the installed code, byte for byte
    source = sorted(client.glob("_*.py"))[0]
    source.write_bytes(source.read_bytes() + b"\n# one more line\n")
    edited = helper_files(None, packages)
    key = f"narwhal_engine_client/{source.name}"
    assert {k for k in before if before[k] != edited[k]} == {key}
    assert helper_digest(edited) != helper_digest(before)
    (client / "_extra.py").write_text("X = 1\n")
    added = helper_files(None, packages)
    assert set(added) - set(edited) == {"narwhal_engine_client/_extra.py"}
    assert helper_digest(added) != helper_digest(edited)


def test_digest_follows_the_engine_client_the_interpreter_imports(tmp_path: Path) -> None:
    """Without a package list, the digest covers the code Python actually imports: an engine
    client shadowed on PYTHONPATH is digested, and editing it changes the digest."""
    client = next(p for p in helper_packages() if p.module == "narwhal_engine_client")
    copy = _copy(client, tmp_path)
    path = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]  # kept, after it
    script = (
        "import narwhal_engine_client as c\n"
        "from narwhal_trial._provenance import helper_digest, helper_files\n"
        "print(c.__file__)\n"
        "print(helper_digest(helper_files(None)))"
    )

    def digest() -> tuple[str, str]:
        done = subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
            env={"PYTHONPATH": os.pathsep.join([str(tmp_path), *path]), "PATH": "/usr/bin:/bin"},
        )
        where, value = done.stdout.split()
        return where, value

    where, first = digest()
    assert Path(where).parent == copy.path
    assert first == helper_digest(helper_files(None))
    init = copy.path / "__init__.py"
    init.write_bytes(init.read_bytes() + b"\n# changed\n")
    assert digest()[1] != first


def _old_manifest() -> dict[str, object]:
    """A manifest as written before the digest covered the engine client and the store."""
    return {
        "format": "narwhal.trial.manifest", "format_version": 1, "run_id": "trial-x",
        "base_url": "http://127.0.0.1:1", "start_time": "2026-12-01T00:00:00.000+00:00",
        "workload_path": "w.json", "workload_digest": "0" * 64, "helper_digest": "1" * 64,
        "helper_files": {"narwhal_trial/__init__.py": "2" * 64}, "helper_version": "0.1.0",
        "hostname": "h", "source_revision": "unknown", "source_dirty": None, "command": ["x"],
        "python_version": "CPython 3.11.7", "httpx_version": "0.28.1", "event_loop": "asyncio",
        "limits": {"max_in_flight": 64, "max_lag_s": 0.05, "request_timeout_s": 300.0,
                   "drain_timeout_s": 600.0, "drain_gauges": []},
        "arguments": {}, "model": "m", "requests": 1, "rate": 1.0, "ttft_s": "2",
        "tpot_s": "0.0333", "attainment": "0.95", "input_tokens": 8, "output_tokens": 8,
        "warmup_request_id": "trial-x-warmup",
    }  # fmt: skip


def test_older_manifests_still_read_and_unknown_keys_are_refused() -> None:
    """format_version stays 1: the new keys are optional (an older manifest reads with no
    packages and no launch records); the model stays strict."""
    old = Manifest.model_validate(_old_manifest())
    assert old.packages == {} and old.launch_records == []
    new = Manifest.model_validate(
        _old_manifest()
        | {
            "packages": {"narwhal-trial": "0.1.0"},
            "launch_records": [
                {"file": "launch-records/a.txt", "source": "/x/a.txt", "sha256": "3" * 64}
            ],
        }
    )
    assert orjson.loads(new.model_dump_json())["launch_records"][0]["file"].endswith("a.txt")
    with pytest.raises(ValidationError, match="Extra inputs"):
        Manifest.model_validate(_old_manifest() | {"helper_packages": []})
    extra = {"file": "a", "source": "b", "sha256": "c", "mode": 384}
    with pytest.raises(ValidationError, match="Extra inputs"):
        Manifest.model_validate(_old_manifest() | {"launch_records": [extra]})
