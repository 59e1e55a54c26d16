"""--parallel-groups and --shard without engines: option checks, groups, shard split, progress."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import orjson
import pytest

from narwhal_profile_cli import run
from narwhal_profile_cli._errors import ProfileUsageError
from narwhal_profile_cli._options import Shard
from narwhal_profile_cli._progress import Progress
from narwhal_profile_cli.sweeps._groups import group_units, shard_store_path, shard_units
from narwhal_store import EngineEntry


def _entry(iid: str, group: str | None, role: str = "mixed") -> EngineEntry:
    doc: dict[str, Any] = {"iid": iid, "url": "http://127.0.0.1:9", "role": role}
    if group is not None:
        doc["shared_device"] = {"group": group}
    return EngineEntry.model_validate(doc)


FLEET = [
    _entry("a.p", "a", "prefill"),
    _entry("b.p", "b", "prefill"),
    _entry("a.d", "a", "decode"),
    _entry("lone", None),
    _entry("c.p", "c", "prefill"),
    _entry("b.d", "b", "decode"),
    _entry("b", None),  # a lone engine named like group b stays its own unit
]


def test_group_units_keep_fleet_order_and_whole_groups() -> None:
    units = group_units(FLEET)
    assert [(u.label(), [e.iid for e in u.engines]) for u in units] == [
        ("group a", ["a.p", "a.d"]),
        ("group b", ["b.p", "b.d"]),
        ("engine lone", ["lone"]),
        ("group c", ["c.p"]),
        ("engine b", ["b"]),
    ]


@pytest.mark.parametrize("count", [1, 2, 3, 4, 5])
def test_shards_cover_every_group_once_and_balance_engines(count: int) -> None:
    units = group_units(FLEET)
    shares = [shard_units(units, Shard(k, count)) for k in range(1, count + 1)]
    labels = [u.label() for share in shares for u in share]
    assert sorted(labels) == sorted(u.label() for u in units)  # each group in one shard
    loads = [sum(len(u.engines) for u in share) for share in shares]
    assert max(loads) - min(loads) <= 1
    again = [shard_units(list(reversed(units)), Shard(k, count)) for k in range(1, count + 1)]
    assert [{u.label() for u in s} for s in again] == [{u.label() for u in s} for s in shares]


def test_a_share_beyond_the_groups_is_refused() -> None:
    with pytest.raises(ProfileUsageError, match=r"--shard 6/6: the fleet has only 5 GPU group"):
        shard_units(group_units(FLEET), Shard(6, 6))


def test_shard_store_path() -> None:
    path = Path("profiles/fleet-profiles.json")
    assert shard_store_path(path, None) == path
    assert shard_store_path(path, Shard(2, 3)) == Path("profiles/fleet-profiles.shard-2-of-3.json")


def test_progress_shows_every_group_at_work() -> None:
    stream = io.StringIO()
    progress = Progress(stream, enabled=True, clock_ns=lambda: 0)
    progress.update("g0.p", "prefill", "L=512")
    progress.update("g1.p", "decode", "512x4")
    assert (
        stream.getvalue()
        .rsplit("\r", 1)[-1]
        .startswith("g0.p · prefill · L=512 | g1.p · decode · 512x4 · ETA")
    )
    progress.finish("g0.p")
    assert stream.getvalue().rsplit("\r", 1)[-1].startswith("g1.p · decode · 512x4 · ETA")


@pytest.fixture
def fleet_file(tmp_path: Path) -> Path:
    """Two groups whose engines cannot be reached (nothing may get past validation)."""
    path = tmp_path / "fleet.json"
    engines = [
        {"iid": iid, "url": "http://127.0.0.1:9", "role": "mixed", "shared_device": {"group": g}}
        for iid, g in (("g0.m", "g0"), ("g1.m", "g1"))
    ]
    doc = {"format": "narwhal.fleet", "format_version": 1, "profiles": {"path": "p/s.json"}}
    path.write_bytes(orjson.dumps({**doc, "engines": engines}))
    return path


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--parallel-groups", "0"], "--parallel-groups: '0' is not positive"),
        (["--parallel-groups", "x"], "--parallel-groups: 'x' is not an integer"),
        (["--parallel-groups", "257"], "--parallel-groups: 257 is above the maximum of 256"),
        (["--shard", "3/2"], "--shard: '3/2' needs 1 <= K <= M"),
        (["--shard", "0/2"], "--shard: '0/2' needs 1 <= K <= M"),
        (["--shard", "1-2"], "--shard: '1-2' is not K/M"),
        (["--shard", "3/3"], "--shard 3/3: the fleet has only 2 GPU group(s)"),
        (["--shard", "1/2", "--only", "g0.m"], "--shard is exclusive with --only"),
        (
            ["--merge", "a.json", "--merge", "b.json", "--out", "o.json", "--parallel-groups", "2"],
            "--parallel-groups applies to live sweeps, not to --merge",
        ),
        (
            ["--refit-samples", "s.json", "--out", "o.json", "--shard", "1/2"],
            "--shard applies to live sweeps, not to --refit-samples",
        ),
    ],
)
def test_bad_scale_out_options(
    fleet_file: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    """Bad values and misplaced options are usage errors (exit 2) and write nothing."""
    assert run(["--fleet", str(fleet_file), *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("narwhal-profile: error: ") and message in err, err
    assert sorted(p.name for p in fleet_file.parent.iterdir()) == ["fleet.json"]
