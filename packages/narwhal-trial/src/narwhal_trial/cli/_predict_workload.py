"""``predict --workload FILE``: the workload file read for the predictor (the command layer's part).

The file is read and validated as ``run`` reads it (``workload._file.load_workload``: WorkloadError
names the file), which imports the engine client, so the predictor itself (``_predict``) never
imports this module: it gets the shape and the facts (``predictor._workload.WorkloadFacts``).

- A scheduled workload (``prepare --trace`` or ``--arrivals``) holds its requests, their due times
  and their lengths: ``--input-tokens``, ``--output-tokens``, ``--requests`` and ``--rate`` are
  refused beside it (use ``--speedup``); the shape's ``input_tokens``/``output_tokens`` are its
  longest request's.
- The runbook's workload (no schedule) gives the input and output tokens; ``--requests`` is still
  needed (and ``--rate`` or ``--find-max-rate``), ``--speedup`` is refused.
"""

from __future__ import annotations

from pathlib import Path

from narwhal_trial._errors import TrialUsageError
from narwhal_trial._limits import DEFAULT_MAX_IN_FLIGHT
from narwhal_trial.predictor._vtime import TrialShape
from narwhal_trial.predictor._workload import WorkloadFacts
from narwhal_trial.workload._file import load_workload
from narwhal_trial.workload._schedule import speedup_refusal

_NS = 1_000_000_000


def workload_shape(
    path: Path,
    *,
    requests: int | None,
    speedup: float | None = None,
    rate: float | None = None,
    input_tokens: int | None = None,
    output_tokens: int | None = None,
    kv_transfer_s_per_token: float = 0.0,
    max_num_batched_tokens: int | None = None,
    max_in_flight: int | None = DEFAULT_MAX_IN_FLIGHT,
) -> tuple[TrialShape, WorkloadFacts]:
    """The shape and the facts of the workload at ``path`` under the given flags (None: not
    given); WorkloadError for a file that cannot be used, TrialUsageError naming the flags that
    do not apply to it (see the module's docstring)."""
    loaded = load_workload(path)
    workload, label = loaded.workload, f"workload {path}"
    lengths = [
        f
        for f, v in (("--input-tokens", input_tokens), ("--output-tokens", output_tokens))
        if v is not None
    ]
    settings = (kv_transfer_s_per_token, max_num_batched_tokens, max_in_flight)
    sched = workload.schedule
    if sched is None:
        if lengths:
            raise TrialUsageError(
                f"{' and '.join(lengths)} cannot be used with {label}: it holds the input and "
                f"output tokens ({workload.input_tokens} / {workload.output_tokens})"
            )
        if speedup is not None:
            raise speedup_refusal("--speedup", label, "predicted at --rate with --requests")
        if requests is None:
            raise TrialUsageError(f"{label} is the runbook's workload: give --requests")
        shape = TrialShape(workload.input_tokens, workload.output_tokens, requests, *settings)
        return shape, WorkloadFacts(loaded.path, loaded.sha256, "runbook")
    given = [
        *lengths,
        *(f for f, v in (("--requests", requests), ("--rate", rate)) if v is not None),
    ]
    if given:
        raise TrialUsageError(
            f"{' and '.join(given)} cannot be used with {label}: it holds its {sched.requests} "
            f"requests, their due times and lengths ({sched.source.kind}); use --speedup X to "
            "scale its time axis"
        )
    shape = TrialShape(
        workload.input_tokens,
        workload.output_tokens,
        sched.requests,
        *settings,
        offsets_s=tuple(t / _NS for t in sched.due_offsets_ns),
        inputs=tuple(sched.input_tokens),
        outputs=tuple(sched.output_tokens),
    )
    return shape, WorkloadFacts(loaded.path, loaded.sha256, sched.source.kind)


def predict_shape(
    workload: Path | None,
    *,
    requests: int | None,
    rate: float | None,
    speedup: float | None,
    input_tokens: int | None,
    output_tokens: int | None,
    kv_transfer_s_per_token: float,
    max_num_batched_tokens: int | None,
    max_in_flight: int | None,
) -> tuple[TrialShape, WorkloadFacts | None]:
    """``predict``'s shape from its options: the ``--workload`` file's (with its facts), or the
    runbook's from ``--input-tokens``, ``--output-tokens`` and ``--requests``; TrialUsageError
    names a missing or bad option."""
    if rate is not None and not (0 < rate < float("inf")):
        raise TrialUsageError(f"--rate must be a positive number, got {rate:g}")
    if workload is not None:
        return workload_shape(
            workload,
            requests=requests,
            speedup=speedup,
            rate=rate,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            kv_transfer_s_per_token=kv_transfer_s_per_token,
            max_num_batched_tokens=max_num_batched_tokens,
            max_in_flight=max_in_flight,
        )
    given = (
        ("--input-tokens", input_tokens),
        ("--output-tokens", output_tokens),
        ("--requests", requests),
    )
    missing = [flag for flag, value in given if value is None]
    if missing or input_tokens is None or output_tokens is None or requests is None:
        raise TrialUsageError(f"give {' and '.join(missing)}, or --workload FILE")
    shape = TrialShape(
        input_tokens,
        output_tokens,
        requests,
        kv_transfer_s_per_token,
        max_num_batched_tokens,
        max_in_flight,
    )
    return shape, None
