"""--shard auto: the share a Kubernetes Indexed Job's environment names, and the example manifests.

Kubernetes sets JOB_COMPLETION_INDEX (0-based) in each pod of an Indexed Job; the manifest sets
NARWHAL_SHARD_COUNT to spec.completions. The end-to-end test runs the pods' commands as local
processes, one after another, against one simulated fleet, merges their stores and compares the
result with a one-process profile of the same engines.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import pytest

from narwhal_profile_cli import run
from narwhal_profile_cli._errors import ProfileUsageError
from narwhal_profile_cli._options import RawOptions, Shard, validate
from narwhal_profile_cli._shard_env import COUNT_VARIABLE, INDEX_VARIABLE, shard_from_env
from narwhal_profile_cli.sweeps._groups import group_units, shard_store_path, shard_units
from narwhal_sim.testing import SimFleet, sim_config
from narwhal_store import load_fleet, read_store

from ._command import run_profile_command
from ._modes import run_in_process

if TYPE_CHECKING:
    from .conftest import Kit

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "kubernetes"


def _env(index: str | None, count: str | None) -> dict[str, str]:
    pairs = ((INDEX_VARIABLE, index), (COUNT_VARIABLE, count))
    return {name: value for name, value in pairs if value is not None}


# -- the environment --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("index", "count", "share"),
    [("0", "3", (1, 3)), ("2", "3", (3, 3)), ("0", "1", (1, 1)), (" 1\n", "2 ", (2, 2))],
)
def test_the_share_is_the_index_plus_one_of_the_count(
    index: str, count: str, share: tuple[int, int]
) -> None:
    found = shard_from_env({**_env(index, count), "UNRELATED": "x"})
    assert (found.index, found.count) == share
    assert found.origin == f"{INDEX_VARIABLE}={index.strip()}, {COUNT_VARIABLE}={count.strip()}"


REFUSALS = [
    (None, "3", f"{INDEX_VARIABLE} is not set (Kubernetes sets it in the pods of an Indexed Job)"),
    ("0", None, f"{COUNT_VARIABLE} is not set (set it in the Job's manifest, equal to"),
    (None, None, f"{INDEX_VARIABLE} is not set"),
    ("x", "3", f"{INDEX_VARIABLE}='x' is not a non-negative integer"),
    ("-1", "3", f"{INDEX_VARIABLE}='-1' is not a non-negative integer"),
    ("1.0", "3", f"{INDEX_VARIABLE}='1.0' is not a non-negative integer"),
    ("1_0", "30", f"{INDEX_VARIABLE}='1_0' is not a non-negative integer"),
    ("", "3", f"{INDEX_VARIABLE}='' is not a non-negative integer"),
    ("0", "three", f"{COUNT_VARIABLE}='three' is not a non-negative integer"),
    ("0", "0", f"{COUNT_VARIABLE}='0' is not positive"),
    ("3", "3", f"{INDEX_VARIABLE}='3' is not below {COUNT_VARIABLE}='3' (the index counts from 0"),
    ("7", "3", f"{INDEX_VARIABLE}='7' is not below {COUNT_VARIABLE}='3'"),
    ("9" * 5000, "3", f"{INDEX_VARIABLE}='{'9' * 77}...' is too large"),
]


@pytest.mark.parametrize(("index", "count", "message"), REFUSALS)
def test_refusals_name_the_variable_and_its_value(
    index: str | None, count: str | None, message: str
) -> None:
    with pytest.raises(ProfileUsageError) as caught:
        shard_from_env(_env(index, count))
    assert caught.value.exit_code == 2
    assert caught.value.message.startswith("--shard auto: " + message), caught.value.message
    assert "\n" not in caught.value.message


def test_validate_reads_only_the_environment_it_is_handed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The process environment is the command layer's to pass: validate itself never reads it."""
    monkeypatch.setenv(INDEX_VARIABLE, "1")
    monkeypatch.setenv(COUNT_VARIABLE, "3")
    shard = validate(RawOptions(fleet="f", shard="auto"), _env("1", "3")).scale.shard
    assert shard == Shard(2, 3) and shard is not None and shard.label() == "2/3"
    assert shard.option() == f"--shard auto (2/3: {INDEX_VARIABLE}=1, {COUNT_VARIABLE}=3)"
    with pytest.raises(ProfileUsageError, match=f"{INDEX_VARIABLE} is not set"):
        validate(RawOptions(fleet="f", shard="auto"))
    assert validate(RawOptions(fleet="f", shard="2/3"), {}).scale.shard == Shard(2, 3)
    with pytest.raises(ProfileUsageError, match=r"--shard: 'automatic' is not K/M \(e.g. 1/2\) or"):
        validate(RawOptions(fleet="f", shard="automatic"), _env("1", "3"))


def test_a_count_far_above_the_groups_costs_nothing() -> None:
    """Only as many shares as there are groups are dealt: share 1 of 10^12 is the largest group
    (dealing all 10^12 shares raised MemoryError)."""
    units = group_units(load_fleet(EXAMPLES / "fleet.json").config.engines)
    (first,) = shard_units(units, Shard(1, 10**12))
    with pytest.raises(ProfileUsageError, match=r"share 10 of 1000000000000 is empty"):
        shard_units(units, Shard(10, 10**12))
    assert first.label() == "group h200-0"


# -- the command --------------------------------------------------------------------------------


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


def _set(monkeypatch: pytest.MonkeyPatch, index: str | None, count: str | None) -> None:
    for name, value in ((INDEX_VARIABLE, index), (COUNT_VARIABLE, count)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)


@pytest.mark.parametrize(
    ("index", "count", "message"),
    [
        *REFUSALS[:4],
        ("2", "3", "--shard auto (3/3: JOB_COMPLETION_INDEX=2, NARWHAL_SHARD_COUNT=3): the fleet "
         "has only 2 GPU group(s) (lone engines included), so share 3 of 3 is empty"),
    ],
)  # fmt: skip
def test_the_command_refuses_in_one_line_and_writes_nothing(
    fleet_file: Path,
    monkeypatch: pytest.MonkeyPatch,
    index: str | None,
    count: str | None,
    message: str,
) -> None:
    """In-process: cli.run hands the process environment over; exit 2, one line, no file."""
    _set(monkeypatch, index, count)
    done = run_in_process("--fleet", fleet_file, "--shard", "auto")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("narwhal-profile: error: ") and message in done.stderr
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert sorted(p.name for p in fleet_file.parent.iterdir()) == ["fleet.json"]


@pytest.mark.parametrize("output_format", ["text", "json"])
def test_the_installed_command_refuses_an_index_beyond_the_count(
    fleet_file: Path, monkeypatch: pytest.MonkeyPatch, output_format: str
) -> None:
    """A subprocess (the environment inherited, as in a pod): exit 2, one line, nothing written."""
    _set(monkeypatch, "2", "2")
    done = run_profile_command(
        "--fleet", fleet_file, "--shard", "auto", "--format", output_format, timeout=60
    )
    assert done.returncode == 2
    message = f"--shard auto: {INDEX_VARIABLE}='2' is not below {COUNT_VARIABLE}='2'"
    if output_format == "text":
        assert done.stdout == ""
        assert len(done.stderr.splitlines()) == 1, done.stderr
        assert done.stderr.startswith(f"narwhal-profile: error: {message}"), done.stderr
    else:
        error = done.result()["error"]
        assert error["code"] == "usage" and error["message"].startswith(message), error
    assert sorted(p.name for p in fleet_file.parent.iterdir()) == ["fleet.json"]


def test_help_names_auto_and_its_variables(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "--shard K/M|auto" in text
    for name in (INDEX_VARIABLE, COUNT_VARIABLE, "spec.completions"):
        assert name in text


# -- the example manifests ----------------------------------------------------------------------


def _text(name: str) -> str:
    return (EXAMPLES / name).read_text()


def _single(pattern: str, text: str) -> str:
    found = re.findall(pattern, text, re.M)
    assert len(found) == 1, (pattern, found)
    return str(found[0])


def test_manifests_run_indexed_shards_and_merge_them_all() -> None:
    """Text checks (no YAML parser needed): Indexed, the count equal to completions, --shard auto,
    and the merge naming every shard's store and the fleet's profiles.path."""
    shards, merge = _text("profile-shards.yaml"), _text("profile-merge.yaml")
    assert _single(r"^\s*completionMode:\s*(\S+)\s*$", shards) == "Indexed"
    completions = int(_single(r"^\s*completions:\s*(\d+)\s*$", shards))
    assert int(_single(r"^\s*parallelism:\s*(\d+)\s*$", shards)) == completions
    count = _single(rf"-\s+name:\s*{COUNT_VARIABLE}\s*\n\s*value:\s*\"(\d+)\"", shards)
    assert int(count) == completions
    assert INDEX_VARIABLE not in re.sub(r"#.*", "", shards)  # Kubernetes sets it, not the manifest
    assert re.search(r"^\s*-\s+--shard\s*\n\s*-\s+auto\s*$", shards, re.M)
    profiles = load_fleet(EXAMPLES / "fleet.json").profiles_path
    assert profiles.is_absolute()
    stores = re.findall(r"^\s*-\s+--merge\s*\n\s*-\s+(\S+)\s*$", merge, re.M)
    expected = [
        shard_store_path(profiles, Shard(k, completions)) for k in range(1, completions + 1)
    ]
    assert stores == [str(p) for p in expected]
    assert _single(r"^\s*-\s+--out\s*\n\s*-\s+(\S+)\s*$", merge) == str(profiles)


def _documents(name: str) -> list[dict[str, Any]]:
    yaml = pytest.importorskip("yaml")
    docs = list(yaml.safe_load_all(_text(name)))
    assert all(isinstance(d, dict) for d in docs)
    return docs


def _container(job: dict[str, Any]) -> dict[str, Any]:
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert container["command"] == ["narwhal-profile"]
    return dict(container)


def _mounts(job: dict[str, Any]) -> dict[str, str]:
    """Mount path of the ConfigMap (``configMap``) and of the claim (its claim name)."""
    spec = job["spec"]["template"]["spec"]
    paths = {m["name"]: m["mountPath"] for m in _container(job)["volumeMounts"]}
    mounts = {}
    for volume in spec["volumes"]:
        if "configMap" in volume:
            mounts["configMap"] = paths[volume["name"]]
        else:
            mounts[volume["persistentVolumeClaim"]["claimName"]] = paths[volume["name"]]
    return mounts


def _option(args: list[str], flag: str) -> list[str]:
    return [args[i + 1] for i, arg in enumerate(args) if arg == flag]


def test_manifests_parse_and_fit_the_fleet_file() -> None:
    """Parsed: the Jobs mount the fleet's ConfigMap and the claim of profiles-pvc.yaml, the fleet's
    profiles.path lies on that claim, and every share of the example fleet measures something."""
    (claim,) = _documents("profiles-pvc.yaml")
    (shards,) = _documents("profile-shards.yaml")
    (merge,) = _documents("profile-merge.yaml")
    assert claim["kind"] == "PersistentVolumeClaim" and claim["spec"]["accessModes"] == [
        "ReadWriteMany"
    ]
    spec = shards["spec"]
    assert shards["kind"] == "Job" and spec["completionMode"] == "Indexed"
    completions = spec["completions"]
    assert (
        spec["parallelism"] == completions and spec["template"]["spec"]["restartPolicy"] == "Never"
    )
    container = _container(shards)
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env == {COUNT_VARIABLE: str(completions)}
    args = container["args"]
    assert _option(args, "--shard") == ["auto"] and "--overwrite" in args

    fleet = load_fleet(EXAMPLES / "fleet.json")
    name = claim["metadata"]["name"]
    for job in (shards, merge):
        mounts = _mounts(job)
        assert _option(_container(job)["args"], "--fleet") == [mounts["configMap"] + "/fleet.json"]
        assert fleet.profiles_path.is_relative_to(mounts[name])
    merge_args = _container(merge)["args"]
    expected = [
        shard_store_path(fleet.profiles_path, Shard(k, completions))
        for k in range(1, completions + 1)
    ]
    assert _option(merge_args, "--merge") == [str(p) for p in expected]
    assert _option(merge_args, "--out") == [str(fleet.profiles_path)]
    units = group_units(fleet.config.engines)
    for k in range(1, completions + 1):
        assert shard_units(units, Shard(k, completions))  # no pod is refused for an empty share


# -- end to end ---------------------------------------------------------------------------------

SHARDS = 3
#: Three GPU groups: g0 a prefill and a decode engine (share 1: the largest group first), g1 and
#: g2 one mixed engine each (shares 2 and 3). g1 simulates an H100, whose decode steps are about
#: 28% slower than the H200 of the others at every measured point: a profile of the wrong engine
#: would be told apart.
ENGINES: list[dict[str, Any]] = [
    {"iid": "g0.prefill", "role": "prefill", "shared_device": {"group": "g0"}},
    {"iid": "g0.decode", "role": "decode", "shared_device": {"group": "g0"}},
    {"iid": "g1.mixed", "role": "mixed", "shared_device": {"group": "g1"}},
    {"iid": "g2.mixed", "role": "mixed", "shared_device": {"group": "g2"}},
]
SHARES = {"g0.prefill": 1, "g0.decode": 1, "g1.mixed": 2, "g2.mixed": 3}
SIM = sim_config(None, **{"g1.mixed": {"preset": "h100-llama-3.1-8b"}})

#: How far two profiles of one simulated engine may differ at a measured point. The simulator
#: jitters every step by 1%; at time scale 4 the shortest TTFT (2,048 tokens) is ~13 ms of real
#: time, which loopback HTTP on a loaded machine moves by several percent. Observed on 2 cores:
#: idle, prefill within 6% (at 2,048 tokens; 1.4% above) and decode within 0.6%; with a busy loop
#: on one core, 8.7% and 0.6%. The H100 engine's decode fit differs from an H200's by 28%.
PREFILL_TOLERANCE = 0.20
DECODE_TOLERANCE = 0.15
#: Prefill is compared from this length up (50 ms and more of real time at time scale 4): in a CI
#: run with two test workers beside two busy loops the 2,048-token TTFT of one of the two runs
#: moved by 29% while the longer lengths agreed within 1%.
PREFILL_COMPARED_FROM = 8192


def _prefill_s(profile: dict[str, Any], length: float) -> float:
    c = profile["prefill_fit"]["coefficients"]
    return float(c["a"] + c["b"] * length + c["c"] * length * length)


def _decode_s(profile: dict[str, Any], n: float, ctx: float) -> float:
    c = profile["decode_fit"]["coefficients"]
    return float(c["d0"] + c["d1"] * n + c["d2"] * n * ctx)


def _differences(a: dict[str, Any], b: dict[str, Any]) -> tuple[list[float], list[float]]:
    """The relative differences of ``a``'s fits from ``b``'s at ``b``'s measured points: prefill
    lengths from ``PREFILL_COMPARED_FROM``, then decode (concurrency, context) points."""
    prefill = [
        abs(_prefill_s(a, r["x"][0]) / _prefill_s(b, r["x"][0]) - 1)
        for r in b["prefill_fit"]["residuals"]
        if r["x"][0] >= PREFILL_COMPARED_FROM
    ]
    decode = [
        abs(_decode_s(a, *r["x"]) / _decode_s(b, *r["x"]) - 1) for r in b["decode_fit"]["residuals"]
    ]
    return prefill, decode


def _by_engine(path: Path, kit: Kit) -> tuple[dict[str, Any], dict[str, Any]]:
    """The store's profiles and the sidecar's entries, by engine (read_store verifies the pair)."""
    read_store(path)
    side = kit.load(path.with_name(path.stem + ".samples.json"))
    return (
        {p["key"]["engine"]: p for p in kit.load(path)["profiles"]},
        {e["key"]["engine"]: e for e in side["profiles"]},
    )


def _points(entry: dict[str, Any]) -> tuple[Any, ...]:
    """What a sidecar entry says was measured: the settings (but the scale-out and the random
    prompt seed of each run) and every prefill length and cohort."""
    skip = ("shard", "parallel_groups", "prompt_seed")
    settings = {k: v for k, v in entry["settings"].items() if k not in skip}
    return (
        settings,
        [s["length"] for s in entry["prefill_samples"]],
        [(s["input_len"], s["concurrency"], s["repeat"]) for s in entry["decode_samples"]],
    )


@pytest.mark.slow
def test_indexed_job_shards_merge_into_the_one_process_profile(
    kit: Kit, sim_factory: Callable[..., SimFleet], monkeypatch: pytest.MonkeyPatch
) -> None:
    """3 pods' commands (one after another) and the merge give the one-process profile: the same
    engines and keys, the same measured points, fits within the simulator's noise."""
    fleet = sim_factory(ENGINES, sim_config=SIM, time_scale=kit.time_scale)
    folder = fleet.fleet_path.parent / "profiles"
    command = ("--fleet", fleet.fleet_path, *kit.small_sweep)
    monkeypatch.setenv(COUNT_VARIABLE, str(SHARDS))
    stores = []
    for index in range(SHARDS):
        monkeypatch.setenv(INDEX_VARIABLE, str(index))
        done = kit.run(*command, "--shard", "auto", "--overwrite")  # as profile-shards.yaml
        assert done.returncode == 0, done.stderr
        store = folder / f"fleet-profiles.shard-{index + 1}-of-{SHARDS}.json"
        mine = [iid for iid, share in SHARES.items() if share == index + 1]
        done.success(f"wrote {len(mine)} profile(s) to {store}", mine)
        stores.append(store)
    monkeypatch.delenv(INDEX_VARIABLE)
    monkeypatch.delenv(COUNT_VARIABLE)
    whole = kit.run(*command)
    assert whole.returncode == 0, whole.stderr
    merged_path = folder / "merged.json"
    merge = kit.run(
        "--fleet", fleet.fleet_path, *(a for s in stores for a in ("--merge", s)),
        "--out", merged_path,
    )  # fmt: skip
    assert merge.returncode == 0, merge.stderr
    assert merge.stdout.splitlines()[-1] == f"merged 4 measured profiles to {merged_path}"

    merged, merged_side = _by_engine(merged_path, kit)
    one, one_side = _by_engine(folder / "fleet-profiles.json", kit)
    assert sorted(merged) == sorted(one) == sorted(SHARES)
    for iid, share in SHARES.items():
        assert merged[iid]["key"] == one[iid]["key"]
        assert merged_side[iid]["settings"]["shard"] == f"{share}/{SHARDS}"
        assert one_side[iid]["settings"]["shard"] is None
        assert _points(merged_side[iid]) == _points(one_side[iid])
        prefill, decode = _differences(merged[iid], one[iid])
        assert prefill and max(prefill) <= PREFILL_TOLERANCE, (iid, prefill)
        assert max(decode) <= DECODE_TOLERANCE, (iid, decode)
    _, other_engine = _differences(merged["g1.mixed"], one["g2.mixed"])
    assert min(other_engine) > DECODE_TOLERANCE, other_engine  # an H100 is not an H200
