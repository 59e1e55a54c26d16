"""``predict``'s options, declared once as dataclass fields (``_declare``), and the
``PredictRequest`` they make with the trial's shape."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from narwhal_trial._limits import DEFAULT_MAX_IN_FLIGHT
from narwhal_trial._stats import parse_fraction, parse_seconds
from narwhal_trial.cli._common_options import ApiKeyEnvOpt, SpeedupOpt, decimal_option
from narwhal_trial.cli._predict_workload import predict_shape
from narwhal_trial.predictor._model import TrialTarget
from narwhal_trial.predictor._predict import DEFAULT_REPLICATIONS, MAX_REPLICATIONS, PredictRequest
from narwhal_trial.predictor._vtime import DEFAULT_MAX_NUM_BATCHED_TOKENS, TrialShape
from narwhal_trial.predictor._workload import WorkloadFacts


@dataclass(frozen=True, slots=True, kw_only=True)
class PredictOptions:
    """Everything ``predict`` is given: the fleet and its profiles, the target, the trial's
    shape (or ``--workload``), the predictor's settings and where the result goes."""

    fleet: Annotated[Path, typer.Option("--fleet", help="narwhal.fleet file of the fleet.")]
    profiles: Annotated[Path, typer.Option("--profiles", help="Accepted profile store.")]
    ttft: Annotated[str, typer.Option("--ttft", help="TTFT bound, seconds.")]
    tpot: Annotated[str, typer.Option("--tpot", help="TPOT bound, seconds.")]
    attainment: Annotated[str, typer.Option("--attainment", help="Required good fraction.")]
    input_tokens: Annotated[
        int | None,
        typer.Option("--input-tokens", min=1, help="Prompt tokens (or --workload)."),
    ] = None
    output_tokens: Annotated[
        int | None,
        typer.Option("--output-tokens", min=1, help="Output tokens (or --workload)."),
    ] = None
    requests: Annotated[
        int | None,
        typer.Option(
            "--requests", min=1, help="Offers of the trial (a scheduled workload holds its own)."
        ),
    ] = None
    rate: Annotated[
        float | None, typer.Option("--rate", help="Offered requests per second to predict.")
    ] = None
    find_max_rate: Annotated[
        bool,
        typer.Option(
            "--find-max-rate",
            help="Also search the highest rate predicted to pass (a scheduled workload: the "
            "highest --speedup).",
        ),
    ] = False
    workload: Annotated[
        Path | None,
        typer.Option(
            "--workload",
            help="workload.json from prepare: the runbook's gives --input-tokens and "
            "--output-tokens; a scheduled one (prepare --trace or --arrivals) is predicted on its "
            "own due times and lengths, divided by --speedup, instead of --requests at --rate.",
        ),
    ] = None
    speedup: SpeedupOpt = None
    limits: Annotated[
        Path | None,
        typer.Option(
            "--limits",
            help="narwhal.limits file: max_num_seqs, max_num_batched_tokens, "
            "enable_chunked_prefill per engine (over the profiles' values).",
        ),
    ] = None
    kv_transfer: Annotated[
        float,
        typer.Option(
            "--kv-transfer-s-per-token",
            min=0.0,
            help="Seconds per prompt token to move a split request's KV from the prefill to the "
            "decode engine (no profile measures it).",
        ),
    ] = 0.0
    max_num_batched_tokens: Annotated[
        int | None,
        typer.Option(
            "--max-num-batched-tokens",
            min=1,
            help="Every engine's per-step token budget, over what the profiles recorded (read "
            "from the engine or given in a limits file when it was measured; else "
            f"{DEFAULT_MAX_NUM_BATCHED_TOKENS}). The prediction says which it used.",
        ),
    ] = None
    max_in_flight: Annotated[
        int,
        typer.Option(
            "--max-in-flight", min=1, help="The trial's in-flight cap (as run --max-in-flight)."
        ),
    ] = DEFAULT_MAX_IN_FLIGHT
    replications: Annotated[
        int,
        typer.Option(
            "--replications",
            min=1,
            max=MAX_REPLICATIONS,
            help="Monte Carlo replications of the fleet, each with latencies drawn from the "
            "profile's own raw timings (the sidecar): the median attainment, its 5-95% range and "
            "the probability that the trial passes; with --find-max-rate, the rates where that "
            "probability crosses 0.9, 0.5 and 0.1. 1: the fits alone, deterministic (the "
            "predictions of format_version 1).",
        ),
    ] = DEFAULT_REPLICATIONS
    seed: Annotated[
        int,
        typer.Option("--seed", min=0, help="Seed of the replications (same seed, same result)."),
    ] = 0
    calibrate: Annotated[
        Path | None,
        typer.Option(
            "--calibrate",
            help="A probe file (narwhal.probe, from `narwhal-profile --verify`) of this store: "
            "each engine's speed is drawn from the probe's factors (always applied). Or a run "
            "folder of a trial of this fleet: compare its median TTFT and TPOT with the "
            "prediction at its own rate and report the correction (one factor on every engine's "
            "prefill fit, one on its decode fit) that makes them agree; reported only, unless "
            "--apply-calibration.",
        ),
    ] = None
    probe_weight: Annotated[
        float | None,
        typer.Option(
            "--probe-weight",
            min=0.0,
            max=1.0,
            help="With --calibrate PROBE: how much of the probe's drift to believe, as the "
            "power its factors are raised to (1: whole; 0: none, the profile's speed). "
            "Default 0.25: on vLLM's CPU server the trials after a probe ran nearer the profile "
            "than the probe said, and a quarter of its factor was the least wrong.",
        ),
    ] = None
    apply_calibration: Annotated[
        bool,
        typer.Option(
            "--apply-calibration",
            help="Predict with the --calibrate correction applied (the prediction says so).",
        ),
    ] = False
    frontend: Annotated[
        str | None,
        typer.Option(
            "--frontend",
            metavar="URL",
            help="A frontend that publishes its workers' scheduler settings (NVIDIA Dynamo's "
            "dynamo_frontend_model_max_num_seqs and _max_num_batched_tokens): read once and used "
            "over the profiles' (under --limits); a difference from a profile is warned about.",
        ),
    ] = None
    api_key_env: ApiKeyEnvOpt = None
    json_out: Annotated[
        bool, typer.Option("--json", help="Print the JSON document instead of the text.")
    ] = False
    out: Annotated[
        Path | None, typer.Option("--out", help="Also write the JSON document to this new file.")
    ] = None

    def shape(self) -> tuple[TrialShape, WorkloadFacts | None]:
        """The trial's shape: the ``--workload`` file's (with its facts) or the runbook's from
        the lengths and ``--requests``; TrialUsageError names a missing or bad option."""
        return predict_shape(
            self.workload,
            requests=self.requests,
            rate=self.rate,
            speedup=self.speedup,
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            kv_transfer_s_per_token=self.kv_transfer,
            max_num_batched_tokens=self.max_num_batched_tokens,
            max_in_flight=self.max_in_flight,
        )

    def target(self) -> TrialTarget:
        """The SLO and the required good fraction, parsed (a usage error names the flag)."""
        return TrialTarget(
            decimal_option(parse_seconds, self.ttft, "--ttft"),
            decimal_option(parse_seconds, self.tpot, "--tpot"),
            decimal_option(parse_fraction, self.attainment, "--attainment"),
        )

    def request(self, shape: TrialShape, facts: WorkloadFacts | None) -> PredictRequest:
        """What the predictor is asked, for the trial's ``shape`` (and a workload's ``facts``)."""
        return PredictRequest(
            fleet=self.fleet,
            profiles=self.profiles,
            limits=self.limits,
            shape=shape,
            target=self.target(),
            rate=self.rate,
            find_max_rate=self.find_max_rate,
            replications=self.replications,
            seed=self.seed,
            calibrate=self.calibrate,
            apply_calibration=self.apply_calibration,
            probe_weight=self.probe_weight,
            frontend=self.frontend,
            workload=facts,
            speedup=self.speedup,
        )
