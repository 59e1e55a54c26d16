"""Bad inputs across the four commands (narwhal-profile, the trial's launcher, narwhal-sim,
narwhal-report), run as the real commands: one table, one test per row.

Every case runs in a folder of its own that holds all its input files. Each asserts the exit code,
exactly one ``PROG: error: ...`` line on stderr naming the problem and nothing on stdout, no
traceback, no password echoed, and that nothing in the folder was created or changed (each entry's
path, mode and bytes, or link target, hashed before and after). The codes: narwhal-profile (its
reference), narwhal-sim and narwhal-report exit 2 for usage or bad input and 1 for a blocking
error; the trial's launcher exits 1 for all of them, as the runbook's table has it (its 2 means a
judged run: attainment or scheduling missed, with a summary.json). Cases that need no engine point
at a closed loopback port: a command that contacted the engine before refusing the input would fail
with a different message. The few that need a live engine share one simulated fleet. The
subprocesses run once per module in a small worker pool; each row then checks its own outcome.

Cases marked ``lock`` put a path under ``locked/``, a folder holding valid copies of the inputs,
mode 000 while the command runs: a folder the user cannot enter or read. Root ignores permission
bits, so as root the command runs with CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH dropped from its
capability bounding set (``_UNPRIVILEGED``): still uid 0 and the same interpreter (the venv's
python lives under /root, which "nobody" cannot reach), but bound by the folder's mode like any
user. ``test_locked_folder_is_unenterable`` proves it is.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest

from narwhal_sim.testing import start_sim_fleet
from narwhal_store import Generator, load_fleet, new_documents, write_store
from narwhal_trial.workload._file import Sampling, SeedPrompt, Workload, workload_bytes

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
LAUNCHER = ROOT / "tools" / "measurement" / "load_trial.py"
SECRET = "s3cret-pw"
CLOSED = "http://127.0.0.1:9"  # nothing listens on the discard port: no engine is contacted
READ_ONLY = "/proc/1"  # not writable, even for root
PROGS = {
    "profile": "narwhal-profile",
    "trial": "load_trial.py",
    "sim": "narwhal-sim",
    "report": "narwhal-report",
}
LOCKED = "locked"
COPIED = (
    "fleet.json",
    "limits.json",
    "workload.json",
    "sim.json",
    "store.json",
    "store.samples.json",
    "launch.txt",
    "requests.jsonl",
    "journal.jsonl",
)
"""The inputs ``locked/`` holds copies of."""
_UNPRIVILEGED = """\
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
for cap in (1, 2):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH: what lets root ignore modes
    if libc.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP: gone after the exec below
        raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")
os.execv(sys.argv[1], sys.argv[1:])
"""
"""Run argv[1:] without the capabilities that let root ignore permission bits."""

Setup = Callable[[Path, str], None]


@dataclass(frozen=True)
class Case:
    """One bad input: which command, its arguments, the exit code and a needle of the message."""

    id: str
    prog: str
    args: tuple[str, ...]
    code: int
    needle: str
    setup: Setup | None = None
    engine: bool = False  # "{engine}" in args and files is the shared simulated engine's URL
    lock: bool = False  # locked/ (copies of the inputs) is mode 000 while the command runs

    def command(self, engine: str) -> list[str]:
        args = [a.replace("{engine}", engine) for a in self.args]
        if self.prog == "trial":
            argv = [sys.executable, str(LAUNCHER), *args]
        else:
            module = {"profile": "narwhal_profile_cli", "sim": "narwhal_sim"}
            argv = [sys.executable, "-m", module.get(self.prog, "narwhal_report"), *args]
        return as_a_user(argv) if self.lock else argv


def as_a_user(argv: list[str]) -> list[str]:
    """``argv`` as a process bound by permission bits: as it is for a user, through
    ``_UNPRIVILEGED`` for root."""
    if os.geteuid() != 0:
        return argv
    return [sys.executable, "-c", _UNPRIVILEGED, *argv]


@dataclass
class Outcome:
    code: int
    stdout: str
    stderr: str
    before: dict[str, str] = field(default_factory=dict)
    after: dict[str, str] = field(default_factory=dict)


# -- input files ---------------------------------------------------------------------------------


def _json(path: Path, doc: Any) -> None:
    path.write_bytes(orjson.dumps(doc))


def _fleet(url: str, **changes: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "format": "narwhal.fleet",
        "format_version": 1,
        "profiles": {"path": "profiles/store.json"},
        "engines": [
            {"iid": "e0", "url": url, "role": "mixed", "model": "m"},
            {"iid": "e1", "url": url.replace(":9", ":10"), "role": "decode"},
        ],
    }
    doc.update(changes)
    return doc


def _workload(model: str = "m") -> bytes:
    return workload_bytes(
        Workload(
            model=model,
            max_model_len=4096,
            engine_version="0.11.0",
            pool=list(range(300, 332)),
            input_tokens=64,
            output_tokens=8,
            seed=1729,
            sampling=Sampling(min_tokens=8, max_tokens=8),
            seed_prompt=SeedPrompt(
                name="seed", sha256="0" * 64, completion_tokens=32, token_ids_source="logprobs"
            ),
            created="2026-12-01T00:00:00+00:00",
        )
    )


def write_inputs(folder: Path, engine: str) -> None:
    """The files every case may use: a valid fleet, limits, workload, sim config, profile store
    (empty, with its sidecar), launch record, request records and journal (both empty); and
    ``locked/`` holding a copy of each, for the cases that lock it."""
    folder.mkdir(parents=True)
    _json(folder / "fleet.json", _fleet(CLOSED))
    _json(folder / "live-fleet.json", _fleet(engine))
    _json(
        folder / "limits.json",
        {"format": "narwhal.limits", "format_version": 1, "engines": {"e0": {"max_num_seqs": 8}}},
    )
    (folder / "workload.json").write_bytes(_workload())
    _json(folder / "sim.json", {"format": "narwhal.sim", "format_version": 1, "defaults": {}})
    store, sidecar = new_documents(
        mode="live",
        fleet_sha256=load_fleet(folder / "fleet.json").sha256,
        generator=Generator(name="narwhal-profile", version="0.1.0"),
        profiles=[],
        samples=[],
        created_at="2026-12-01T00:00:00+00:00",
    )
    write_store(folder / "store.json", store, sidecar, mode="fresh")
    (folder / "launch.txt").write_text("vllm serve m --no-enable-prefix-caching\n")
    (folder / "requests.jsonl").write_bytes(b"")
    (folder / "journal.jsonl").write_bytes(b"")
    (folder / LOCKED).mkdir()
    for name in COPIED:
        shutil.copy2(folder / name, folder / LOCKED / name)


def snapshot(folder: Path) -> dict[str, str]:
    """Every entry under ``folder``: mode and content hash (link target for symlinks)."""
    seen: dict[str, str] = {}
    for base, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = Path(base) / name
            info = path.lstat()
            if stat.S_ISLNK(info.st_mode):
                what = f"link:{path.readlink()}"
            elif stat.S_ISREG(info.st_mode):
                what = hashlib.sha256(path.read_bytes()).hexdigest()
            else:
                what = "dir"
            seen[str(path.relative_to(folder))] = f"{stat.S_IMODE(info.st_mode):o}:{what}"
    return seen


# -- setups that shape one case's folder -----------------------------------------------------------


def bad_fleet(**changes: Any) -> Setup:
    def setup(folder: Path, engine: str) -> None:
        _json(folder / "bad.json", _fleet(CLOSED, **changes))

    return setup


def bad_engine(**changes: Any) -> Setup:
    def setup(folder: Path, engine: str) -> None:
        doc = _fleet(CLOSED)
        doc["engines"][0].update(changes)
        _json(folder / "bad.json", doc)

    return setup


def raw_file(name: str, data: bytes) -> Setup:
    def setup(folder: Path, engine: str) -> None:
        (folder / name).write_bytes(data)

    return setup


def symlink(name: str, target: str, *, folder_too: bool = False) -> Setup:
    def setup(folder: Path, engine: str) -> None:
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if folder_too:
            (folder / "elsewhere").mkdir()
        path.symlink_to(target)

    return setup


def existing_store(folder: Path, engine: str) -> None:
    (folder / "profiles").mkdir()
    (folder / "profiles" / "store.json").write_text("{}")


def non_empty(name: str, holds: str = "summary.json") -> Setup:
    def setup(folder: Path, engine: str) -> None:
        (folder / name).mkdir()
        (folder / name / holds).write_text("{}")

    return setup


def sim_config_doc(doc: Any) -> Setup:
    return raw_file("bad-sim.json", orjson.dumps(doc))


# -- the table ----------------------------------------------------------------------------------


def _profile_cases() -> Iterator[Case]:
    fleet = ("--fleet", "fleet.json")
    lists = {
        "--prefill-lens": "1,2,4",
        "--decode-input-lens": "1,2",
        "--decode-concurrency": "1,2",
    }
    bad_items = {
        "empty": "",
        "blank": " ",
        "word": "x",
        "empty-item": "1,,2,3",
        "negative": "-1,2,3",
        "zero": "0,1,2",
        "fraction": "1.5,2,3",
        "nan": "nan,1,2",
        "inf": "1,inf,3",
        "huge": "1,2,99999999999999999999999999999",
        "repeated": "5,5,5",
        "too-many": ",".join(str(n) for n in range(1, 66)),
    }
    for option in lists:
        for name, value in bad_items.items():
            yield Case(f"profile{option}-{name}", "profile", (*fleet, option, value), 2, option)
    yield Case(
        "profile-concurrency-above-1024",
        "profile",
        (*fleet, "--decode-concurrency", "1,1025"),
        2,
        "above the maximum of 1024",
    )
    scalars = {
        "--decode-tokens": {"below": "2", "above": "65537"},
        "--prefill-repeats": {"below": "2", "above": "101"},
        "--decode-repeats": {"below": "0", "above": "101"},
    }
    for option, bounds in scalars.items():
        values = {
            "empty": "",
            "word": "x",
            "negative": "-1",
            "fraction": "3.5",
            "nan": "nan",
            "exponent": "1e3",
            "huge": "9" * 40,
            **bounds,
        }
        for name, value in values.items():
            yield Case(f"profile{option}-{name}", "profile", (*fleet, option, value), 2, option)
    neighbours = {
        "--neighbour-prefill-rps": "1",
        "--neighbour-decode-rps": "1",
        "--neighbour-prefill-tokens": "8",
        "--neighbour-decode-input-tokens": "8",
        "--neighbour-decode-output-tokens": "8",
    }
    bad_neighbour = {
        "rps": {
            "zero": "0",
            "negative": "-1",
            "nan": "nan",
            "inf": "inf",
            "word": "x",
            "1e9": "1e9",
        },
        "tokens": {"zero": "0", "word": "x", "fraction": "1.5", "huge": "2000000"},
    }
    for option in neighbours:
        kind = "rps" if option.endswith("rps") else "tokens"
        for name, value in bad_neighbour[kind].items():
            rest = [x for o, v in neighbours.items() if o != option for x in (o, v)]
            args = (*fleet, "--colocated", *rest, option, value)
            yield Case(f"profile{option}-{name}", "profile", args, 2, option)
    modes: list[tuple[str, tuple[str, ...], str]] = [
        ("merge-once", ("--merge", "a.json", "--out", "o.json"), "at least twice"),
        ("merge-no-out", ("--merge", "a.json", "--merge", "b.json"), "requires --out"),
        ("merge-only", ("--merge", "a", "--merge", "b", "--out", "o", "--only", "e0"), "--only"),
        (
            "merge-overwrite",
            ("--merge", "a", "--merge", "b", "--out", "o", "--overwrite"),
            "--overwrite",
        ),
        ("merge-same", ("--merge", "a", "--merge", "a", "--out", "o"), "more than once"),
        (
            "merge-refit",
            ("--merge", "a", "--merge", "b", "--out", "o", "--refit-samples", "s"),
            "--refit",
        ),
        ("refit-no-out", ("--refit-samples", "s.samples.json"), "requires --out"),
        ("refit-only", ("--refit-samples", "s", "--out", "o", "--only", "e0"), "--only"),
        ("refit-colocated", ("--refit-samples", "s", "--out", "o", "--colocated"), "--colocated"),
        ("out-alone", ("--out", "o.json"), "--out"),
        ("colocated-alone", ("--colocated",), "neighbour options"),
        ("neighbour-alone", ("--neighbour-prefill-rps", "1"), "--colocated"),
        ("format", ("--format", "xml"), "--format"),
        ("unknown-option", ("--no-such-option",), "No such option"),
        ("only-empty", ("--only", ""), "--only"),
        (
            "refit-missing",
            ("--refit-samples", "s.samples.json", "--out", "o.json"),
            "no such sidecar",
        ),
        ("merge-missing", ("--merge", "a.json", "--merge", "b.json", "--out", "o.json"), "a.json"),
    ]
    for name, args, needle in modes:
        yield Case(f"profile-mode-{name}", "profile", (*fleet, *args), 2, needle)
    yield Case("profile-no-fleet", "profile", (), 2, "--fleet")
    yield Case("profile-fleet-missing", "profile", ("--fleet", "none.json"), 2, "none.json")
    fleets: list[tuple[str, Setup, str]] = [
        ("not-json", raw_file("bad.json", b"{nope"), "not valid JSON"),
        ("list", raw_file("bad.json", b"[]"), "bad.json"),
        ("format", bad_fleet(format="narwhal.fleets"), "format"),
        ("version-2", bad_fleet(format_version=2), "format_version"),
        ("unknown-key", bad_fleet(extra=1), "unknown key"),
        ("no-engines", bad_fleet(engines=[]), "engines"),
        ("no-profiles", bad_fleet(profiles={}), "profiles.path"),
        ("bad-role", bad_engine(role="boss"), "engines[0].role"),
        ("bad-iid", bad_engine(iid="-x"), "engines[0].iid"),
        ("dup-iid", bad_engine(iid="e1"), "e1"),
        ("ftp-url", bad_engine(url="ftp://127.0.0.1:9"), "http:// or https://"),
        ("no-host", bad_engine(url="http://"), "no host"),
        ("bad-port", bad_engine(url="http://127.0.0.1:99999"), "invalid port"),
        ("password", bad_engine(url=f"http://u:{SECRET}@127.0.0.1:9"), "credentials"),
        ("query", bad_engine(url=f"http://127.0.0.1:9/?key={SECRET}"), "query"),
        ("contract-key", bad_engine(engine_contract={"colour": "red"}), "engine_contract"),
    ]
    for name, setup, needle in fleets:
        yield Case(f"profile-fleet-{name}", "profile", ("--fleet", "bad.json"), 2, needle, setup)
    limits: list[tuple[str, bytes, str]] = [
        ("not-json", b"{", "not valid JSON"),
        (
            "unknown-iid",
            b'{"format":"narwhal.limits","format_version":1,"engines":{"zz":{"max_num_seqs":4}}}',
            "zz",
        ),
        (
            "zero",
            b'{"format":"narwhal.limits","format_version":1,"engines":{"e0":{"max_num_seqs":0}}}',
            "max_num_seqs",
        ),
        (
            "version",
            b'{"format":"narwhal.limits","format_version":9,"engines":{}}',
            "format_version",
        ),
    ]
    for name, data, needle in limits:
        yield Case(
            f"profile-limits-{name}",
            "profile",
            (*fleet, "--limits", "bad-limits.json"),
            2,
            needle,
            raw_file("bad-limits.json", data),
        )
    yield Case("profile-limits-missing", "profile", (*fleet, "--limits", "no.json"), 2, "no.json")
    yield Case(
        "profile-dest-symlink",
        "profile",
        fleet,
        2,
        "symlink",
        symlink("profiles/store.json", "../elsewhere-store.json"),
    )
    yield Case(
        "profile-dest-folder-symlink",
        "profile",
        fleet,
        2,
        "symlink",
        symlink("profiles", "elsewhere", folder_too=True),
    )
    yield Case("profile-dest-exists", "profile", fleet, 2, "already exists", existing_store)
    yield Case(
        "profile-dest-read-only",
        "profile",
        ("--fleet", "bad.json"),
        2,
        "not writable",
        bad_fleet(profiles={"path": f"{READ_ONLY}/narwhal/store.json"}),
    )


def _trial_cases() -> Iterator[Case]:
    def prepare(**over: str) -> tuple[str, ...]:
        opts = {
            "--base": CLOSED,
            "--input-tokens": "64",
            "--output-tokens": "8",
            "--seed": "1",
            "--out": "w",
        }
        opts.update(over)
        return ("prepare", *(x for k, v in opts.items() if v is not None for x in (k, v)))

    def run(**over: str) -> tuple[str, ...]:
        opts = {
            "--base": CLOSED,
            "--workload": "workload.json",
            "--rate": "1",
            "--requests": "10",
            "--ttft": "2",
            "--tpot": "0.0333",
            "--attainment": "0.95",
            "--out": "run",
        }
        opts.update(over)
        return ("run", *(x for k, v in opts.items() if v is not None for x in (k, v)))

    bases = {
        "ftp": ("ftp://127.0.0.1:9", "http:// or https://"),
        "no-host": ("http://", "no host"),
        "bad-port": ("http://127.0.0.1:99999", "not a valid URL"),
        "password": (f"http://u:{SECRET}@127.0.0.1:9", "credentials"),
        "words": ("not a url", "http:// or https://"),
    }
    for name, (url, needle) in bases.items():
        yield Case(f"trial-prepare-base-{name}", "trial", prepare(**{"--base": url}), 1, needle)
        yield Case(f"trial-run-base-{name}", "trial", run(**{"--base": url}), 1, needle)
    for option, values in {
        "--input-tokens": ("0", "-1", "x"),
        "--output-tokens": ("0", "x"),
        "--seed": ("-1", "x"),
    }.items():
        for value in values:
            yield Case(
                f"trial-prepare{option}-{value}", "trial", prepare(**{option: value}), 1, option
            )
    yield Case("trial-prepare-no-out", "trial", prepare(**{"--out": None}), 1, "--out")  # type: ignore[arg-type]
    yield Case("trial-prepare-unknown", "trial", (*prepare(), "--bogus"), 1, "--bogus")
    yield Case(
        "trial-prepare-out-not-empty", "trial", prepare(), 1, "not empty", non_empty("w", "x")
    )
    yield Case(
        "trial-prepare-out-file", "trial", prepare(**{"--out": "fleet.json"}), 1, "not a folder"
    )
    yield Case(
        "trial-prepare-out-symlink", "trial", prepare(), 1, "symlink", symlink("w", "elsewhere")
    )
    yield Case(
        "trial-prepare-out-read-only",
        "trial",
        prepare(**{"--out": f"{READ_ONLY}/narwhal/w"}),
        1,
        "not writable",
    )
    run_values = {
        "--rate": ("0", "-1", "nan", "inf", "x", "20000", "1e-9"),
        "--requests": ("0", "-1", "x", "100001"),
        "--max-in-flight": ("0", "5000", "x"),
        "--max-lag": ("-1", "nan"),
        "--request-timeout": ("0", "-5"),
        "--drain-timeout": ("0",),
        "--keepalive-expiry": ("0", "-1", "nan", "x", "7200"),
        "--ttft": ("x", "-1", "0"),
        "--tpot": ("x", "nan"),
        "--attainment": ("1.5", "-0.1", "x", "0"),
        "--transport": ("bogus",),
    }
    for option, values in run_values.items():
        for value in values:
            needle = "--requests" if value == "1e-9" else option
            yield Case(f"trial-run{option}-{value}", "trial", run(**{option: value}), 1, needle)
    yield Case(
        "trial-run-raw-https",
        "trial",
        (*run(**{"--base": "https://127.0.0.1:9"}), "--transport", "raw"),
        1,
        "--transport raw",
    )
    yield Case("trial-run-no-workload", "trial", run(**{"--workload": None}), 1, "--workload")  # type: ignore[arg-type]
    yield Case("trial-run-unknown", "trial", (*run(), "--bogus"), 1, "--bogus")
    yield Case(
        "trial-run-workload-missing", "trial", run(**{"--workload": "none.json"}), 1, "none.json"
    )
    yield Case(
        "trial-run-workload-not-json",
        "trial",
        run(**{"--workload": "bad.json"}),
        1,
        "bad.json",
        raw_file("bad.json", b"{"),
    )
    yield Case(
        "trial-run-workload-wrong-format",
        "trial",
        run(**{"--workload": "fleet.json"}),
        1,
        "fleet.json",
    )
    yield Case(
        "trial-run-out-holds-run", "trial", run(), 1, "already holds summary.json", non_empty("run")
    )
    yield Case("trial-run-out-symlink", "trial", run(), 1, "symlink", symlink("run", "elsewhere"))
    yield Case(
        "trial-run-out-read-only",
        "trial",
        run(**{"--out": f"{READ_ONLY}/narwhal/run"}),
        1,
        "not writable",
    )
    yield Case("trial-no-command", "trial", ("bogus",), 1, "bogus")

    def edge(*more: str, **over: str) -> tuple[str, ...]:
        opts = {
            "--base": CLOSED,
            "--workload": "workload.json",
            "--requests": "10",
            "--ttft": "2",
            "--tpot": "0.0333",
            "--attainment": "0.95",
            "--out": "edge",
        }
        opts.update(over)
        return ("edge", *(x for k, v in opts.items() for x in (k, v)), *more)

    edge_values = {
        "--tolerance": ("0", "-0.05", "nan", "2", "x"),
        "--max-trials": ("1", "0", "x"),
        "--max-repeats": ("-1", "11"),
        "--start-rate": ("0", "nan", "20000", "1e-9"),
    }
    for option, values in edge_values.items():
        for value in values:
            needle = "--requests" if value == "1e-9" else option
            yield Case(f"trial-edge{option}-{value}", "trial", edge(option, value), 1, needle)
    for option in ("--profiles", "--fleet", "--limits", "--seed", "--replications"):
        value = {"--profiles": "store.json", "--fleet": "fleet.json", "--limits": "limits.json"}
        yield Case(
            f"trial-edge{option}-alone", "trial", edge(option, value.get(option, "3")), 1, option
        )
    yield Case("trial-edge-base-ftp", "trial", edge(**{"--base": "ftp://h:9"}), 1, "http://")
    yield Case("trial-edge-no-requests", "trial", edge()[:5] + edge()[7:], 1, "--requests")
    yield Case(
        "trial-edge-workload-missing", "trial", edge(**{"--workload": "none.json"}), 1, "none.json"
    )
    yield Case(
        "trial-edge-out-holds-edge", "trial", edge(), 1, "already holds edge.json",
        non_empty("edge", "edge.json"),
    )  # fmt: skip
    yield Case(
        "trial-edge-out-symlink", "trial", edge(), 1, "symlink", symlink("edge", "elsewhere")
    )
    yield Case(
        "trial-edge-profiles-outside-domain", "trial",
        edge("--fleet", "fleet.json", "--profiles", "store.json"), 1, "accepted profile",
    )  # fmt: skip
    yield Case(
        "trial-reconcile-missing",
        "trial",
        ("reconcile", "--requests", "none.jsonl", "--journal", "none2.jsonl"),
        1,
        "none.jsonl",
    )


def _sim_cases() -> Iterator[Case]:
    def up(fleet: str = "fleet.json", *more: str) -> tuple[str, ...]:
        return ("up", "--fleet", fleet, *more)

    fleets: list[tuple[str, Setup, str]] = [
        ("not-json", raw_file("bad.json", b"{nope"), "not valid JSON"),
        ("version-2", bad_fleet(format_version=2), "format_version"),
        ("unknown-key", bad_fleet(extra=1), "unknown key"),
        ("password", bad_engine(url=f"http://u:{SECRET}@127.0.0.1:9"), "credentials"),
        ("bad-role", bad_engine(role="boss"), "engines[0].role"),
        ("https", bad_engine(url="https://127.0.0.1:9"), "http://HOST:PORT"),
        ("no-port", bad_engine(url="http://127.0.0.1"), "http://HOST:PORT"),
        ("not-loopback", bad_engine(url="http://10.1.2.3:9"), "not loopback"),
        ("same-port", bad_engine(url="http://127.0.0.1:10"), "used twice"),
        ("dup-iid", bad_engine(iid="e1"), "e1"),
    ]
    for name, setup, needle in fleets:
        yield Case(f"sim-fleet-{name}", "sim", up("bad.json"), 2, needle, setup)
    yield Case("sim-fleet-missing", "sim", up("none.json"), 2, "none.json")
    configs: list[tuple[str, Any, str]] = [
        ("unknown-key", {"format": "narwhal.sim", "format_version": 1, "defaults": {"x": 1}}, "x"),
        (
            "unknown-iid",
            {"format": "narwhal.sim", "format_version": 1, "engines": {"zz": {}}},
            "zz",
        ),
        ("format", {"format": "narwhal.simulator", "format_version": 1}, "narwhal.sim"),
        (
            "preset",
            {"format": "narwhal.sim", "format_version": 1, "defaults": {"preset": "nope"}},
            "nope",
        ),
        (
            "jitter-text",
            {"format": "narwhal.sim", "format_version": 1, "defaults": {"jitter": "x"}},
            "jitter: expected a relative sigma in [0, 10], got 'x'",
        ),
        (
            "jitter-negative",
            {"format": "narwhal.sim", "format_version": 1, "defaults": {"jitter": -0.1}},
            "jitter: expected a relative sigma in [0, 10], got -0.1",
        ),
        (
            "gpu-memory-text",
            {
                "format": "narwhal.sim",
                "format_version": 1,
                "defaults": {"gpu_memory_utilization": "high"},
            },
            "gpu_memory_utilization: expected a fraction in [0, 1], got 'high'",
        ),
        (
            "gpu-memory-over-one",
            {
                "format": "narwhal.sim",
                "format_version": 1,
                "defaults": {"gpu_memory_utilization": 1.5},
            },
            "gpu_memory_utilization: expected a fraction in [0, 1], got 1.5",
        ),
    ]
    for name, doc, needle in configs:
        yield Case(
            f"sim-config-{name}",
            "sim",
            up("fleet.json", "--sim-config", "bad-sim.json"),
            2,
            needle,
            sim_config_doc(doc),
        )
    for value in ("0", "-1", "nan", "x"):
        yield Case(
            f"sim-time-scale-{value}",
            "sim",
            up("fleet.json", "--time-scale", value),
            2,
            "--time-scale",
        )
    yield Case("sim-preset", "sim", up("fleet.json", "--preset", "nope"), 2, "nope")
    for name, value, needle in (
        ("no-port", "127.0.0.1", "HOST:PORT"),
        ("bad-port", "127.0.0.1:99999", "HOST:PORT"),
        ("not-loopback", "10.1.2.3:18000", "not loopback"),
    ):
        yield Case(f"sim-router-{name}", "sim", up("fleet.json", "--router", value), 2, needle)
    router = ("--router", "127.0.0.1:9")
    yield Case(
        "sim-journal-folder",
        "sim",
        up("fleet.json", *router, "--journal", "."),
        2,
        "not a regular file",
    )
    yield Case(
        "sim-journal-read-only",
        "sim",
        up("fleet.json", *router, "--journal", f"{READ_ONLY}/narwhal/j.jsonl"),
        2,
        "not writable",
    )
    yield Case(
        "sim-journal-under-a-file",
        "sim",
        up("fleet.json", *router, "--journal", "fleet.json/j.jsonl"),
        2,
        "not a folder",
    )
    yield Case(
        "sim-journal-without-router", "sim", up("fleet.json", "--journal", "j.jsonl"), 2, "--router"
    )
    yield Case("sim-unknown-option", "sim", up("fleet.json", "--bogus"), 2, "--bogus")
    yield Case("sim-unknown-command", "sim", ("bogus",), 2, "bogus")


def _engine_cases() -> Iterator[Case]:
    live = ("--fleet", "live-fleet.json")
    small = ("--decode-input-lens", "64,128", "--decode-concurrency", "1,2", "--decode-tokens", "8")
    yield Case(
        "profile-engine-only-nothing", "profile", (*live, "--only", "nope"), 1, "nope", engine=True
    )
    yield Case(
        "profile-engine-lengths-too-long",
        "profile",
        (*live, "--only", "e0", "--prefill-lens", "100000,200000,300000", *small),
        1,
        "prefill",
        engine=True,
    )
    yield Case(
        "profile-engine-limits-too-low",
        "profile",
        (*live, "--only", "e0", "--limits", "one.json", "--prefill-lens", "64,128,256", *small),
        1,
        "concurrency",
        raw_file(
            "one.json",
            b'{"format":"narwhal.limits","format_version":1,"engines":{"e0":{"max_num_seqs":1}}}',
        ),
        engine=True,
    )
    yield Case(
        "profile-engine-model-not-served",
        "profile",
        ("--fleet", "wrong-model.json", "--prefill-lens", "64,128,256", *small),
        1,
        "not-served",
        lambda folder, engine: _json(
            folder / "wrong-model.json",
            {
                **_fleet(engine),
                "engines": [{"iid": "e0", "url": engine, "role": "mixed", "model": "not-served"}],
            },
        ),
        engine=True,
    )
    yield Case(
        "trial-engine-model-not-served",
        "trial",
        ("prepare", "--base", "{engine}", "--input-tokens", "8", "--output-tokens", "2",
         "--seed", "1", "--out", "w", "--model", "not-served"),
        1,
        "not-served",
        engine=True,
    )  # fmt: skip
    yield Case(
        "sim-engine-port-taken",
        "sim",
        ("up", "--fleet", "taken.json"),
        1,
        "cannot listen",
        lambda folder, engine: _json(
            folder / "taken.json",
            {**_fleet(engine), "engines": [{"iid": "e0", "url": engine, "role": "mixed"}]},
        ),
        engine=True,
    )


def _locked_cases() -> Iterator[Case]:
    """Every path argument under a folder the user cannot enter or read: one line naming the
    path, exit 1 for the trial (a blocking error), 2 for the others (their bad input)."""
    L = LOCKED
    closed_run = ("run", "--base", CLOSED, "--rate", "1", "--requests", "2", "--ttft", "2",
                  "--tpot", "0.0333", "--attainment", "0.95")  # fmt: skip
    shape = ("--input-tokens", "64", "--output-tokens", "8", "--requests", "10", "--ttft", "2",
             "--tpot", "0.0333", "--attainment", "0.95", "--rate", "1")  # fmt: skip

    def check(**over: str) -> tuple[str, ...]:
        opts = {"--workload": "workload.json", "--fleet": "fleet.json", "--profiles": "store.json"}
        return ("check", *(x for k, v in (opts | over).items() for x in (k, v)))

    def predict(**over: str) -> tuple[str, ...]:
        opts = {"--fleet": "fleet.json", "--profiles": "store.json"}
        return ("predict", *(x for k, v in (opts | over).items() for x in (k, v)), *shape)

    trial: dict[str, tuple[tuple[str, ...], str]] = {
        "prepare-out": (("prepare", "--base", CLOSED, "--input-tokens", "64", "--output-tokens",
                         "8", "--seed", "1", "--out", f"{L}/w"), f"--out {L}/w"),
        "run-out": ((*closed_run, "--workload", "workload.json", "--out", f"{L}/run"),
                    f"--out {L}/run"),
        "run-workload": ((*closed_run, "--workload", f"{L}/workload.json", "--out", "run"),
                         f"{L}/workload.json"),
        "run-launch-record": ((*closed_run, "--workload", "workload.json", "--out", "run",
                               "--launch-record", f"{L}/launch.txt"), f"{L}/launch.txt"),
        "check-workload": (check(**{"--workload": f"{L}/workload.json"}), f"{L}/workload.json"),
        "check-fleet": (check(**{"--fleet": f"{L}/fleet.json"}), f"{L}/fleet.json"),
        "check-profiles": (check(**{"--profiles": f"{L}/store.json"}), f"{L}/store.json"),
        "check-launch-record": ((*check(), "--launch-record", f"{L}/launch.txt"),
                                f"{L}/launch.txt"),
        "reconcile-requests": (("reconcile", "--requests", f"{L}/requests.jsonl", "--journal",
                                "journal.jsonl"), f"{L}/requests.jsonl"),
        "reconcile-journal": (("reconcile", "--requests", "requests.jsonl", "--journal",
                               f"{L}/journal.jsonl"), f"{L}/journal.jsonl"),
        "predict-fleet": (predict(**{"--fleet": f"{L}/fleet.json"}), f"{L}/fleet.json"),
        "predict-profiles": (predict(**{"--profiles": f"{L}/store.json"}), f"{L}/store.json"),
        "predict-limits": ((*predict(), "--limits", f"{L}/limits.json"), f"{L}/limits.json"),
        "predict-out": ((*predict(), "--out", f"{L}/p.json"), f"--out {L}/p.json"),
    }  # fmt: skip
    for name, (args, needle) in trial.items():
        yield Case(f"trial-locked-{name}", "trial", args, 1, needle, lock=True)
    fleet = ("--fleet", "fleet.json")
    profile: dict[str, tuple[tuple[str, ...], str, Setup | None]] = {
        "fleet": (("--fleet", f"{L}/fleet.json"), f"{L}/fleet.json", None),
        "limits": ((*fleet, "--limits", f"{L}/limits.json"), f"{L}/limits.json", None),
        "store": (("--fleet", "bad.json"), f"{L}/profiles",
                  bad_fleet(profiles={"path": f"{L}/profiles/store.json"})),
        "refit-samples": ((*fleet, "--refit-samples", f"{L}/store.samples.json", "--out",
                           "o.json"), f"{L}/store.samples.json", None),
        "refit-out": ((*fleet, "--refit-samples", "store.samples.json", "--out",
                       f"{L}/sub/o.json"), f"{L}/sub", None),
        "merge": ((*fleet, "--merge", f"{L}/store.json", "--merge", "store.json", "--out",
                   "o.json"), f"{L}/store.json", None),
    }  # fmt: skip
    for name, (args, needle, setup) in profile.items():
        yield Case(f"profile-locked-{name}", "profile", args, 2, needle, setup, lock=True)
    report: dict[str, tuple[tuple[str, ...], str]] = {
        "store": ((f"{L}/store.json", "--out", "r.html"), f"{L}/store.json"),
        "out": (("store.json", "--out", f"{L}/r.html"), f"--out {L}/r.html"),
        "fleet": (("store.json", "--out", "r.html", "--fleet", f"{L}/fleet.json"),
                  f"--fleet {L}/fleet.json"),
    }  # fmt: skip
    for name, (args, needle) in report.items():
        yield Case(f"report-locked-{name}", "report", args, 2, needle, lock=True)
    router = ("--router", "127.0.0.1:9")
    sim: dict[str, tuple[tuple[str, ...], str]] = {
        "fleet": (("up", "--fleet", f"{L}/fleet.json"), f"{L}/fleet.json"),
        "sim-config": (("up", "--fleet", "fleet.json", "--sim-config", f"{L}/sim.json"),
                       f"{L}/sim.json"),
        "journal": (("up", "--fleet", "fleet.json", *router, "--journal",
                     f"{L}/journal.jsonl"), f"--journal {L}/journal.jsonl"),
        "ready-file": (("up", "--fleet", "fleet.json", "--ready-file", f"{L}/ready.json"),
                       f"--ready-file {L}/ready.json"),
    }  # fmt: skip
    for name, (args, needle) in sim.items():
        yield Case(f"sim-locked-{name}", "sim", args, 2, needle, lock=True)


CASES = [
    *_profile_cases(),
    *_trial_cases(),
    *_sim_cases(),
    *_engine_cases(),
    *_locked_cases(),
]


@contextlib.contextmanager
def locked(folder: Path, lock: bool) -> Iterator[None]:
    """``folder`` at mode 000 for the duration (when ``lock``), its mode restored after."""
    if not lock:
        yield
        return
    mode = stat.S_IMODE(folder.stat().st_mode)
    folder.chmod(0)
    try:
        yield
    finally:
        folder.chmod(mode)


def _run_case(case: Case, folder: Path, engine: str) -> Outcome:
    write_inputs(folder, engine)
    if case.setup is not None:
        case.setup(folder, engine)
    before = snapshot(folder)
    try:
        with locked(folder / LOCKED, case.lock):
            done = subprocess.run(
                case.command(engine),
                cwd=folder,
                capture_output=True,
                text=True,
                timeout=300,
                stdin=subprocess.DEVNULL,
                env={**os.environ, "NARWHAL_TRIAL_URL": "", "PYTHONDONTWRITEBYTECODE": "1"},
                check=False,
            )
    except subprocess.TimeoutExpired as exc:  # that case fails, the others still report
        return Outcome(-1, "", f"timed out: {exc}", before, snapshot(folder))
    return Outcome(done.returncode, done.stdout, done.stderr, before, snapshot(folder))


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Outcome]]:
    """Every case's outcome; the engine cases share one simulated engine."""
    root = tmp_path_factory.mktemp("bad-inputs")
    with start_sim_fleet(
        root / "sim", [{"iid": "e0", "role": "mixed", "model": "m"}], preset="tiny", time_scale=10
    ) as fleet:
        engine = fleet.urls["e0"]
        with ThreadPoolExecutor(max_workers=4) as pool:
            futures = {
                case.id: pool.submit(_run_case, case, root / "cases" / case.id, engine)
                for case in CASES
            }
            yield {cid: future.result() for cid, future in futures.items()}


def test_the_table_is_large_and_its_ids_unique() -> None:
    """At least 150 cases over the four commands, each id once; the trial never exits 2 for a bad
    input (the runbook's 2 is a judged run); every command has paths under a locked folder."""
    assert len(CASES) >= 150
    assert len({c.id for c in CASES}) == len(CASES)
    assert {c.prog for c in CASES} == set(PROGS)
    assert {c.code for c in CASES if c.prog == "trial"} == {1}
    assert {c.prog for c in CASES if c.lock} == set(PROGS)


def test_locked_folder_is_unenterable(tmp_path: Path) -> None:
    """What the ``lock`` cases rely on: through ``as_a_user`` (root too) the locked folder can be
    neither listed nor entered, and the folder beside it can."""
    write_inputs(tmp_path / "case", CLOSED)
    probe = (
        "import os, sys\n"
        "print(sorted(os.listdir('.'))[:1])\n"
        "for how in (os.listdir, lambda p: os.stat(p + '/fleet.json')):\n"
        "    try:\n"
        "        how(sys.argv[1])\n"
        "    except PermissionError:\n"
        "        print('refused')\n"
    )
    with locked(tmp_path / "case" / LOCKED, True):
        done = subprocess.run(
            as_a_user([sys.executable, "-c", probe, LOCKED]),
            cwd=tmp_path / "case",
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["['fleet.json']", "refused", "refused"]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_bad_input(case: Case, outcomes: dict[str, Outcome]) -> None:
    """Exit code, one error line naming the problem, no traceback, no password, no file touched."""
    got = outcomes[case.id]
    lines = got.stderr.splitlines()
    assert got.code == case.code, got.stderr
    assert len(lines) == 1, got.stderr
    assert lines[0].startswith(f"{PROGS[case.prog]}: error: "), got.stderr
    assert case.needle in lines[0], got.stderr
    assert got.stdout == ""
    assert "Traceback" not in got.stderr
    assert SECRET not in got.stdout + got.stderr
    assert got.after == got.before
