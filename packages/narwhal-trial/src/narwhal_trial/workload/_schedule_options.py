"""``prepare``'s schedule options: a trace's window (``--trace``) or synthetic draws
(``--arrivals``), checked before the engine is asked anything, built once its limit is known.

Without any of these options ``prepare`` writes the runbook's workload, unchanged. The rules:

- ``--trace FILE`` takes its arrivals and lengths from the file, so ``--arrivals``, ``--rate``,
  ``--requests``, ``--input-tokens``/``--output-tokens`` and ``--input-lengths``/
  ``--output-lengths`` are refused beside it; ``--trace-format``, ``--start``, ``--duration``,
  ``--limit``, ``--block-tokens`` and ``--clip-to-model`` belong to it alone;
- ``--arrivals constant|poisson|gamma`` needs ``--rate`` and ``--requests``; each side's length is
  ``--input-tokens N`` (fixed) or ``--input-lengths SPEC`` (drawn, seeded by ``--seed``), not
  both; ``--burstiness`` is gamma's;
- a request that does not fit the served model (input + output > ``max_model_len``) is refused,
  naming how many and the worst (its trace row), unless ``--clip-to-model`` (traces) clips it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from narwhal_trial._errors import TrialUsageError, WorkloadError
from narwhal_trial._limits import MAX_REQUESTS
from narwhal_trial.workload._arrivals import (
    ArrivalKind,
    arrival_offsets_s,
    draw_lengths,
    offsets_ns,
    parse_length_spec,
)
from narwhal_trial.workload._blocks import prefix_reuse
from narwhal_trial.workload._schedule import Schedule, SyntheticSource, TraceSource
from narwhal_trial.workload._trace import (
    DEFAULT_BLOCK_TOKENS,
    Trace,
    TraceFormat,
    clipped,
    longest,
    over_limit,
    read_trace,
)

_NS = 1_000_000_000


@dataclass(frozen=True, slots=True)
class ScheduleOptions:
    """``prepare``'s schedule flags as given (None: not given)."""

    trace: Path | None = None
    trace_format: TraceFormat | None = None
    start_s: float | None = None
    duration_s: float | None = None
    limit: int | None = None
    block_tokens: int | None = None
    clip_to_model: bool = False
    arrivals: ArrivalKind | None = None
    burstiness: float | None = None
    rate: float | None = None
    requests: int | None = None
    input_lengths: str | None = None
    output_lengths: str | None = None

    @property
    def scheduled(self) -> bool:
        return self.trace is not None or self.arrivals is not None

    def source(
        self, input_tokens: int | None, output_tokens: int | None, seed: int
    ) -> ScheduleSource | None:
        """Check the flags together and read the trace; None for the runbook's workload.
        TrialUsageError (or TraceError) naming the flag otherwise, before anything is asked."""
        trace_only = {
            "--trace-format": self.trace_format is not None,
            "--start": self.start_s is not None,
            "--duration": self.duration_s is not None,
            "--limit": self.limit is not None,
            "--block-tokens": self.block_tokens is not None,
            "--clip-to-model": self.clip_to_model,
        }
        drawn = {
            "--rate": self.rate is not None,
            "--requests": self.requests is not None,
            "--input-lengths": self.input_lengths is not None,
            "--output-lengths": self.output_lengths is not None,
            "--burstiness": self.burstiness is not None,
        }
        if self.trace is not None:
            given = {
                **drawn,
                "--arrivals": self.arrivals is not None,
                "--input-tokens": input_tokens is not None,
                "--output-tokens": output_tokens is not None,
            }
            _refuse(given, "with --trace: the trace gives each request's arrival and lengths")
            trace = read_trace(
                self.trace,
                trace_format=self.trace_format,
                start_s=self.start_s or 0.0,
                duration_s=self.duration_s,
                limit=self.limit,
                block_tokens=self.block_tokens or DEFAULT_BLOCK_TOKENS,
            )
            return TraceWindow(trace, self.clip_to_model)
        _refuse(trace_only, "without --trace")
        if self.arrivals is None:
            _refuse(drawn, "without --arrivals (constant, poisson or gamma)")
            if input_tokens is None or output_tokens is None:
                raise TrialUsageError(
                    "prepare needs --input-tokens and --output-tokens (the runbook's workload), "
                    "--trace FILE, or --arrivals with --rate and --requests"
                )
            return None
        return self._synthetic(input_tokens, output_tokens, seed)

    def _synthetic(self, input_tokens: int | None, output_tokens: int | None, seed: int) -> Drawn:
        if self.rate is None or self.requests is None:
            raise TrialUsageError(f"--arrivals {self.arrivals} needs --rate and --requests")
        specs = []
        for side, tokens, spec in (
            ("input", input_tokens, self.input_lengths),
            ("output", output_tokens, self.output_lengths),
        ):
            if tokens is not None and spec is not None:
                raise TrialUsageError(
                    f"give --{side}-tokens (fixed) or --{side}-lengths (drawn), not both"
                )
            if tokens is None and spec is None:
                raise TrialUsageError(
                    f"--arrivals needs --{side}-tokens N or --{side}-lengths SPEC"
                )
            text = str(tokens) if spec is None else spec
            specs.append(parse_length_spec(text, f"--{side}-lengths"))
        if not 1 <= self.requests <= MAX_REQUESTS:
            raise TrialUsageError(
                f"--requests must be from 1 to {MAX_REQUESTS}, got {self.requests}"
            )
        assert self.arrivals is not None
        offsets = arrival_offsets_s(
            self.requests, self.rate, self.arrivals, burstiness=self.burstiness, seed=seed
        )
        # Lengths draw from their own streams: the same seed, other draws than the arrivals'.
        inputs = draw_lengths(self.requests, specs[0], seed=seed + 1)
        outputs = draw_lengths(self.requests, specs[1], seed=seed + 2)
        return Drawn(
            source=SyntheticSource(
                arrivals=self.arrivals,
                rate=self.rate,
                burstiness=self.burstiness,
                input_lengths=str(specs[0]),
                output_lengths=str(specs[1]),
                seed=seed,
            ),
            due_ns=offsets_ns(offsets),
            inputs=[int(x) for x in inputs],
            outputs=[int(x) for x in outputs],
        )


def _refuse(given: dict[str, bool], why: str) -> None:
    bad = [flag for flag, on in given.items() if on]
    if bad:
        raise TrialUsageError(f"{', '.join(bad)} cannot be used {why}")


@dataclass(frozen=True, slots=True)
class TraceWindow:
    """A trace's window, to be fitted to the served model's context."""

    trace: Trace
    clip: bool

    def schedule(self, max_model_len: int, where: str) -> Schedule:
        """The schedule; WorkloadError when a request does not fit and clipping was not asked."""
        trace = self.trace
        over = over_limit(trace, max_model_len)
        if over and not self.clip:
            worst = longest(trace)
            raise WorkloadError(
                f"{len(over)} of {len(trace.requests)} requests of trace {trace.path} do not fit "
                f"the served max_model_len {max_model_len} ({where}); the longest, row "
                f"{worst.row}, has {worst.input_tokens} input + {worst.output_tokens} output "
                "tokens. Take another window, or pass --clip-to-model to clip them"
            )
        if over:
            trace = clipped(trace, max_model_len)
        ids = None
        if any(r.hash_ids is not None for r in trace.requests):
            ids = [list(r.hash_ids or ()) for r in trace.requests]
        inputs = [r.input_tokens for r in trace.requests]
        return Schedule(
            source=TraceSource(
                path=str(Path(trace.path).absolute()),
                format=trace.format,
                sha256=trace.sha256,
                rows=trace.rows,
                dropped_failures=trace.dropped_failures,
                start_s=trace.start_s,
                duration_s=trace.duration_s,
                limit=trace.limit,
                clipped=len(over),
            ),
            due_offsets_ns=[round(r.offset_s * _NS) for r in trace.requests],
            input_tokens=inputs,
            output_tokens=[r.output_tokens for r in trace.requests],
            hash_ids=ids,
            block_tokens=trace.block_tokens,
            prefix_reuse=None if ids is None else prefix_reuse(ids, inputs, trace.block_tokens),
        )


@dataclass(frozen=True, slots=True)
class Drawn:
    """Synthetic arrivals and lengths, to be checked against the served model's context."""

    source: SyntheticSource
    due_ns: list[int]
    inputs: list[int]
    outputs: list[int]

    def schedule(self, max_model_len: int, where: str) -> Schedule:
        totals = [i + o for i, o in zip(self.inputs, self.outputs, strict=True)]
        over = sum(1 for t in totals if t > max_model_len)
        if over:
            n = totals.index(max(totals))
            raise WorkloadError(
                f"{over} of {len(totals)} drawn requests do not fit the served max_model_len "
                f"{max_model_len} ({where}); the longest, request {n}, has {self.inputs[n]} "
                f"input + {self.outputs[n]} output tokens. Draw shorter lengths"
            )
        return Schedule(
            source=self.source,
            due_offsets_ns=self.due_ns,
            input_tokens=self.inputs,
            output_tokens=self.outputs,
            block_tokens=DEFAULT_BLOCK_TOKENS,
        )


ScheduleSource = TraceWindow | Drawn
