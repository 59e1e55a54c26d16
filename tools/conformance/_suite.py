"""One variant's run of our real commands against a live vLLM server, done once per module.

Against the server: ``narwhal-profile`` (a small sweep, ``--format json``, with ``/metrics`` read
just before and just after it), then the trial's ``prepare``, ``run`` (a few requests at a low
rate, draining on vLLM's own gauges) and ``check`` (with the launch record of the server). Every
file goes into the variant's folder; every command's outputs are kept for the assertions and for
the key-leak scan.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from narwhal_engine_client import MetricsSnapshot

from . import _commands as cmd
from ._server import MAX_MODEL_LEN, SERVED_MODEL, VllmServer

IID = "vllm-0"
#: The access-log line of one completion request (uvicorn's, any status).
COMPLETIONS_LOG = '"POST /v1/completions HTTP/1.1"'
VLLM_VERSION = "0.32.0"
#: vLLM's own drain gauges on a bare engine (no router in front).
DRAIN_GAUGES = ("vllm:num_requests_waiting", "vllm:num_requests_running")
TRIAL_SEED = 1729
TRIAL_REQUESTS = 4
TRIAL_RATE = "1"
#: Bounds so loose that only a broken request misses them: the trial's verdict is not under test.
TRIAL_BOUNDS = ("--ttft", "60", "--tpot", "5", "--attainment", "1", "--max-lag", "1")
#: The fleet entry's engine contract: what every server of the tier is launched with.
ENGINE_CONTRACT = {
    "model": SERVED_MODEL,
    "max_model_len": MAX_MODEL_LEN,
    "version": VLLM_VERSION,
    "prefix_caching": False,
}


@dataclass(frozen=True)
class Shape:
    """A variant's profile sweep and trial workload (the workload lies inside the sweep)."""

    prefill_lens: tuple[int, ...]
    decode_input_lens: tuple[int, ...]
    decode_concurrency: tuple[int, ...]
    decode_tokens: int
    prefill_repeats: int
    decode_repeats: int
    trial_input: int
    trial_output: int

    def sweep_args(self) -> list[str]:
        """The ``narwhal-profile`` sweep options."""
        return [
            "--prefill-lens",
            ",".join(map(str, self.prefill_lens)),
            "--decode-input-lens",
            ",".join(map(str, self.decode_input_lens)),
            "--decode-concurrency",
            ",".join(map(str, self.decode_concurrency)),
            "--decode-tokens",
            str(self.decode_tokens),
            "--prefill-repeats",
            str(self.prefill_repeats),
            "--decode-repeats",
            str(self.decode_repeats),
        ]


#: The issue's small sweep, with 192-token decode streams (a delivery stall at a stream's end
#: weighs less) repeated three times: vLLM's CPU server flushes some cohorts in bursts that leave
#: no window to time (three of eight at 128 tokens x 2 on a quiet machine, five of eight beside two
#: busy loops, which left the fit one valid cohort from refusing), and the fit needs only one
#: valid cohort at each concurrency and length.
#: Decode batches up to 8: the prediction check (``_edge_check``) goes to 1.4 times the predicted
#: edge, where about seven sequences decode at once, and predict never extrapolates.
DEFAULT_SHAPE = Shape((128, 256, 512, 1024), (128, 512), (1, 4, 8), 192, 3, 3, 512, 16)


@dataclass
class Suite:
    """Everything one variant's commands produced."""

    variant: str
    server: VllmServer
    root: Path
    shape: Shape
    env: dict[str, str]
    api_key: str | None
    fleet: Path
    launch_record: Path
    before: MetricsSnapshot
    profile: cmd.Done
    after: MetricsSnapshot
    #: Completion POSTs in the server's access log just before and just after the profile.
    posts: tuple[int, int]
    prepare: cmd.Done
    run: cmd.Done
    check: cmd.Done
    extra_done: list[cmd.Done] = field(default_factory=list)
    #: vLLM's trace spans by request id (the interval-4 variant collects them).
    spans: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def store(self) -> Path:
        """The profile store the sweep wrote."""
        return self.root / "profiles" / "fleet-profiles.json"

    @property
    def sidecar(self) -> Path:
        """Its ``.samples.json`` sidecar."""
        return self.root / "profiles" / "fleet-profiles.samples.json"

    @property
    def workload(self) -> Path:
        """``prepare``'s workload file."""
        return self.root / "trial" / "workload" / "workload.json"

    @property
    def run_dir(self) -> Path:
        """``run``'s record folder."""
        return self.root / "trial" / "run"

    @property
    def headers(self) -> dict[str, str]:
        """Authorization for direct requests (empty without a key)."""
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def workload_doc(self) -> dict[str, Any]:
        """``prepare``'s workload (fails naming prepare's outcome when there is none)."""
        assert self.workload.is_file(), f"no workload: prepare failed\n{self.prepare.brief()}"
        return cmd.read_json(self.workload)

    def run_file(self, name: str) -> Path:
        """A file of ``run``'s record folder (fails naming run's outcome when missing)."""
        path = self.run_dir / name
        assert path.is_file(), f"no {name}: run failed\n{self.run.brief()}"
        return path

    def profile_doc(self) -> dict[str, Any]:
        """The one profile of the store."""
        assert self.store.is_file(), f"no store: the profile failed\n{self.profile.brief()}"
        profiles = cmd.read_json(self.store)["profiles"]
        assert len(profiles) == 1, profiles
        doc: dict[str, Any] = profiles[0]
        return doc

    def samples_doc(self) -> dict[str, Any]:
        """The one profile entry of the sidecar."""
        assert self.sidecar.is_file(), f"no sidecar: the profile failed\n{self.profile.brief()}"
        profiles = cmd.read_json(self.sidecar)["profiles"]
        assert len(profiles) == 1, profiles
        doc: dict[str, Any] = profiles[0]
        return doc

    def outputs(self) -> list[cmd.Done]:
        """Every command run against this server."""
        return [self.profile, self.prepare, self.run, self.check, *self.extra_done]


def write_transcript(suite: Suite) -> Path:
    """Every command's argv, exit code and outputs (keys redacted) into ``commands.log``."""
    path = suite.root / "commands.log"
    text = "\n\n".join(done.brief(limit=1_000_000) for done in suite.outputs())
    path.write_text(text + "\n", encoding="utf-8")
    path.chmod(0o600)
    return path


def trial_args(server: VllmServer, *args: str) -> list[str]:
    """``--base URL`` plus ``args``."""
    return ["--base", server.url, *args]


def run_suite(
    variant: str,
    server: VllmServer,
    root: Path,
    shape: Shape = DEFAULT_SHAPE,
    *,
    env: dict[str, str] | None = None,
    api_key: str | None = None,
    fleet_key_env: str | None = None,
    prepare_extra: tuple[str, ...] = (),
    run_extra: tuple[str, ...] = (),
    profile_extra: tuple[str, ...] = (),
) -> Suite:
    """Profile, prepare, run and check against ``server``; keep everything."""
    env = dict(env or {})
    fleet = cmd.write_fleet(
        root,
        server.url,
        iid=IID,
        model=SERVED_MODEL,
        api_key_env=fleet_key_env,
        contract=ENGINE_CONTRACT,
    )
    launch_record = root / "launch-record.txt"
    launch_record.write_text(server.launch_record(), encoding="utf-8")
    before = cmd.metrics(server.url)
    posts_before = server.count_in_log(COMPLETIONS_LOG)
    profile = cmd.profile(
        "--fleet", fleet, *shape.sweep_args(), *profile_extra, "--format", "json", env=env
    )
    after = cmd.metrics(server.url)
    posts_after = server.count_in_log(COMPLETIONS_LOG)
    trial_root = root / "trial"
    trial_root.mkdir(mode=0o700, exist_ok=True)
    prepare = cmd.trial(
        "prepare",
        *trial_args(server),
        "--input-tokens",
        str(shape.trial_input),
        "--output-tokens",
        str(shape.trial_output),
        "--seed",
        str(TRIAL_SEED),
        "--out",
        str(trial_root / "workload"),
        *prepare_extra,
        env=env,
    )
    gauges = [arg for gauge in DRAIN_GAUGES for arg in ("--drain-gauge", gauge)]
    run = cmd.trial(
        "run",
        *trial_args(server),
        "--workload",
        str(trial_root / "workload" / "workload.json"),
        "--rate",
        TRIAL_RATE,
        "--requests",
        str(TRIAL_REQUESTS),
        *TRIAL_BOUNDS,
        *gauges,
        "--out",
        str(trial_root / "run"),
        *run_extra,
        env=env,
    )
    check = cmd.trial(
        "check",
        "--workload",
        str(trial_root / "workload" / "workload.json"),
        "--fleet",
        str(fleet),
        "--profiles",
        str(root / "profiles" / "fleet-profiles.json"),
        "--launch-record",
        str(launch_record),
        env=env,
    )
    return Suite(
        variant=variant,
        server=server,
        root=root,
        shape=shape,
        env=env,
        api_key=api_key,
        fleet=fleet,
        launch_record=launch_record,
        before=before,
        profile=profile,
        after=after,
        posts=(posts_before, posts_after),
        prepare=prepare,
        run=run,
        check=check,
    )


def delta(before: MetricsSnapshot, after: MetricsSnapshot, name: str) -> float:
    """How much a counter (summed over its label sets) grew; the metric must be on both pages."""
    start, end = before.sum(name), after.sum(name)
    assert start is not None and end is not None, f"{name} is not on the /metrics page"
    return end - start
