"""``read_run``: a finished run folder read back through the published models."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from narwhal_trial import ReadError, is_run_folder, read_run

from ..report._kit import write_run_fixture


def test_reads_manifest_records_and_summary(tmp_path: Path) -> None:
    """Every record in sequence order, the manifest and the summary of one run."""
    folder = write_run_fixture(tmp_path / "run", rate=2.0, requests=30, misses=2, errors=3)
    assert is_run_folder(folder) and not is_run_folder(tmp_path)
    run = read_run(folder)
    assert run.manifest.run_id == run.summary.run_id == "trial-fixture-2"
    assert [r.sequence for r in run.records] == list(range(30))
    assert run.summary.counts["client_schedule_miss"] == 2
    assert run.summary.counts["http_error"] == 3


@pytest.mark.parametrize("missing", ["manifest.json", "summary.json", "requests.jsonl"])
def test_a_missing_file_is_named(tmp_path: Path, missing: str) -> None:
    """Each of the three files is needed; the error names it."""
    folder = write_run_fixture(tmp_path / "run", rate=1.0, requests=5)
    (folder / missing).unlink()
    with pytest.raises(ReadError, match=missing.replace(".", r"\.")):
        read_run(folder)


def test_invalid_and_foreign_documents(tmp_path: Path) -> None:
    """A summary with a bad field names the field; records of another run are refused."""
    folder = write_run_fixture(tmp_path / "run", rate=1.0, requests=5)
    summary = json.loads((folder / "summary.json").read_text())
    summary["good"] = "many"
    (folder / "summary.json").write_text(json.dumps(summary))
    with pytest.raises(ReadError, match=r"summary\.json: good"):
        read_run(folder)
    other = write_run_fixture(tmp_path / "other", rate=3.0, requests=5)
    mixed = write_run_fixture(tmp_path / "mixed", rate=1.0, requests=5)
    shutil.copyfile(other / "requests.jsonl", mixed / "requests.jsonl")
    with pytest.raises(ReadError, match="of another run"):
        read_run(mixed)
