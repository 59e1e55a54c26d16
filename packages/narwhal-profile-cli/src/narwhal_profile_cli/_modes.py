"""Mode selection: live sweep, TTFT refit, merge or the freshness probe (``--verify``), and the
conflicts between them (exit 2)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from narwhal_profile_cli._bounds import DEFAULT_THRESHOLD
from narwhal_profile_cli._errors import ProfileUsageError
from narwhal_profile_cli._options import ProfileOptions
from narwhal_profile_cli.sweeps._neighbours import NeighbourSettings

Mode = Literal["live", "refit", "merge", "verify"]


@dataclass(frozen=True, slots=True)
class ModePlan:
    """The chosen mode and what it needs."""

    mode: Mode
    fleet: Path
    out: Path | None
    colocation: NeighbourSettings | None
    threshold: float | None = None
    """``verify``: the drift past which an engine fails."""


def select_mode(options: ProfileOptions) -> ModePlan:
    """Choose the mode from validated options, refusing conflicting combinations."""
    if options.fleet is None:
        raise ProfileUsageError("--fleet PATH is required in every mode")
    if options.verify is not None:
        return _verify(options, options.fleet)
    if options.threshold is not None:
        raise ProfileUsageError("--threshold applies only to --verify")
    merging = len(options.merge) > 0
    refitting = options.refit_samples is not None
    neighbours_given = options.neighbours.supplied()
    if merging:
        if len(options.merge) < 2:
            raise ProfileUsageError(
                f"--merge must be repeated at least twice; got one store ({options.merge[0]})"
            )
        for other, given in (
            ("--only", bool(options.only)),
            ("--refit-samples", refitting),
            ("--overwrite", options.overwrite),
            ("--colocated", options.colocated),
        ):
            if given:
                raise ProfileUsageError(f"--merge is exclusive with {other}")
    elif refitting:
        for other, given in (
            ("--only", bool(options.only)),
            ("--colocated", options.colocated),
        ):
            if given:
                raise ProfileUsageError(f"--refit-samples is exclusive with {other}")
        if options.overwrite:
            raise ProfileUsageError(
                "--overwrite does not apply to --refit-samples: refits always require fresh outputs"
            )
    if merging or refitting:
        flag = "--merge" if merging else "--refit-samples"
        for scale_flag in options.scale.given():
            raise ProfileUsageError(f"{scale_flag} applies to live sweeps, not to {flag}")
        if options.keepalive_expiry_s is not None:
            raise ProfileUsageError(f"--keepalive-expiry applies to live sweeps, not to {flag}")
        for mixing_flag in options.mixing_given:
            raise ProfileUsageError(
                f"{mixing_flag} applies to live sweeps, not to {flag} (a refit recomputes the "
                "retained mixing points' prefill work and refits them)"
            )
        if options.out is None:
            raise ProfileUsageError(f"{flag} requires --out PATH (a fresh profile destination)")
        if neighbours_given:
            raise ProfileUsageError(
                f"{neighbours_given[0]} applies to live sweeps with --colocated, not to {flag}"
            )
        return ModePlan(
            mode="merge" if merging else "refit",
            fleet=options.fleet,
            out=options.out,
            colocation=None,
        )
    if options.scale.shard is not None and options.only:
        raise ProfileUsageError("--shard is exclusive with --only")
    if options.sweep.mixing is None:
        for mixing_flag in options.mixing_given:
            raise ProfileUsageError(f"{mixing_flag} requires --mixing")
    if options.out is not None:
        raise ProfileUsageError(
            "--out applies only to --refit-samples, --merge and --verify; live sweeps write the "
            "fleet's profiles.path"
        )
    return ModePlan(
        mode="live",
        fleet=options.fleet,
        out=None,
        colocation=_colocation(options, neighbours_given),
    )


def _verify(options: ProfileOptions, fleet: Path) -> ModePlan:
    """``--verify STORE --out PROBE``: the probe measures the profile's own points, live, into a
    fresh document; every option of another mode, and every sweep option, is refused."""
    others = [
        ("--merge", bool(options.merge)),
        ("--refit-samples", options.refit_samples is not None),
        ("--overwrite", options.overwrite),
        ("--colocated", options.colocated),
    ]
    for other, given in others:
        if given:
            raise ProfileUsageError(f"--verify is exclusive with {other}")
    for flag in (
        *options.scale.given(),
        *options.mixing_given,
        *options.neighbours.supplied(),
        *options.sweep_given,
    ):
        raise ProfileUsageError(
            f"{flag} does not apply to --verify: the probe measures a few of the profile's own "
            "points, at the profile's own settings"
        )
    if options.out is None:
        raise ProfileUsageError("--verify requires --out PATH (a fresh probe document)")
    threshold = options.threshold
    return ModePlan(
        mode="verify",
        fleet=fleet,
        out=options.out,
        colocation=None,
        threshold=float(DEFAULT_THRESHOLD) if threshold is None else threshold,
    )


def _colocation(options: ProfileOptions, neighbours_given: list[str]) -> NeighbourSettings | None:
    values = options.neighbours
    if not options.colocated:
        if neighbours_given:
            raise ProfileUsageError(f"{neighbours_given[0]} requires --colocated")
        return None
    missing = values.missing()
    if missing:
        raise ProfileUsageError(
            "--colocated requires all five neighbour options; missing " + ", ".join(missing)
        )
    if (
        values.prefill_rps is None
        or values.decode_rps is None
        or values.prefill_tokens is None
        or values.decode_input_tokens is None
        or values.decode_output_tokens is None
    ):  # pragma: no cover - excluded by ``missing()`` above; spelled out for the type checker
        raise ProfileUsageError("--colocated requires all five neighbour options")
    return NeighbourSettings(
        prefill_rps=values.prefill_rps,
        decode_rps=values.decode_rps,
        prefill_tokens=values.prefill_tokens,
        decode_input_tokens=values.decode_input_tokens,
        decode_output_tokens=values.decode_output_tokens,
    )
