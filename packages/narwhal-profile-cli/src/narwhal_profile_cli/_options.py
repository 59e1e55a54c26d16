"""Option values: parsed and validated before any mode is selected (reference, docs/design.md §8).

Every check here is a usage error (exit 2) whose message names the option and the offending value.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from narwhal_profile_cli._bounds import (
    DEFAULT_DECODE_CONCURRENCY,
    DEFAULT_DECODE_INPUT_LENS,
    DEFAULT_DECODE_REPEATS,
    DEFAULT_DECODE_TOKENS,
    DEFAULT_MIXING_CONCURRENCY,
    DEFAULT_MIXING_PREFILLS,
    DEFAULT_MIXING_REPEATS,
    DEFAULT_PREFILL_LENS,
    DEFAULT_PREFILL_REPEATS,
    MAX_DECODE_CONCURRENCY,
    MAX_DECODE_REPEATS,
    MAX_DECODE_TOKENS,
    MAX_LIST_VALUES,
    MAX_MIXING_PREFILLS,
    MAX_MIXING_REPEATS,
    MAX_PREFILL_REPEATS,
    MAX_RATE,
    MAX_TOKENS,
    MIN_DECODE_CONCURRENCY,
    MIN_DECODE_INPUT_LENS,
    MIN_DECODE_REPEATS,
    MIN_DECODE_TOKENS,
    MIN_MIXING_LENS,
    MIN_PREFILL_LENS,
    MIN_PREFILL_REPEATS,
)
from narwhal_profile_cli._command_line import RawOptions as RawOptions
from narwhal_profile_cli._errors import ProfileUsageError
from narwhal_profile_cli._shard_env import shard_from_env

OutputFormat = Literal["text", "json"]

_INTEGER = re.compile(r"\+?[0-9]+")
_FORMATS: tuple[OutputFormat, ...] = ("text", "json")


@dataclass(frozen=True, slots=True)
class MixingOptions:
    """``--mixing`` and its options: the prefill lengths injected (None: the smallest and the
    largest of each engine's kept prefill lengths), the decode streams per point, the prefills
    injected per point and the repeats of each point."""

    lens: tuple[int, ...] | None = None
    concurrency: int = DEFAULT_MIXING_CONCURRENCY
    prefills: int = DEFAULT_MIXING_PREFILLS
    repeats: int = DEFAULT_MIXING_REPEATS


MIXING_OPTIONS = ("--mixing-lens", "--mixing-concurrency", "--mixing-prefills", "--mixing-repeats")


@dataclass(frozen=True, slots=True)
class SweepOptions:
    """The sweep options as supplied: candidate points and counts, before any engine's limits
    (what a sweep actually used is the store's ``SweepSettings``). ``mixing`` is None unless
    ``--mixing`` was given."""

    prefill_lens: tuple[int, ...]
    decode_input_lens: tuple[int, ...]
    decode_concurrency: tuple[int, ...]
    decode_tokens: int
    prefill_repeats: int
    decode_repeats: int
    mixing: MixingOptions | None = None


@dataclass(frozen=True, slots=True)
class NeighbourValues:
    """The five neighbour options; each None when not supplied."""

    prefill_rps: float | None = None
    decode_rps: float | None = None
    prefill_tokens: int | None = None
    decode_input_tokens: int | None = None
    decode_output_tokens: int | None = None

    def supplied(self) -> list[str]:
        """The option names that were given."""
        return [
            name
            for name, value in zip(NEIGHBOUR_OPTIONS, self._values(), strict=True)
            if value is not None
        ]

    def missing(self) -> list[str]:
        """The option names that were not given."""
        return [
            name
            for name, value in zip(NEIGHBOUR_OPTIONS, self._values(), strict=True)
            if value is None
        ]

    def _values(self) -> tuple[float | int | None, ...]:
        return (
            self.prefill_rps,
            self.decode_rps,
            self.prefill_tokens,
            self.decode_input_tokens,
            self.decode_output_tokens,
        )


NEIGHBOUR_OPTIONS = (
    "--neighbour-prefill-rps",
    "--neighbour-decode-rps",
    "--neighbour-prefill-tokens",
    "--neighbour-decode-input-tokens",
    "--neighbour-decode-output-tokens",
)


@dataclass(frozen=True, slots=True)
class ProfileOptions:
    """Every option of the command, validated (values only; modes are checked in ``_modes``)."""

    fleet: Path | None
    only: tuple[str, ...]
    refit_samples: Path | None
    merge: tuple[Path, ...]
    out: Path | None
    limits: Path | None
    overwrite: bool
    sweep: SweepOptions
    colocated: bool
    neighbours: NeighbourValues
    scale: ScaleOut = field(default_factory=lambda: ScaleOut())
    keepalive_expiry_s: float | None = None
    """``--keepalive-expiry`` (None: the engine client's default, 4 s)."""
    mixing_given: tuple[str, ...] = ()
    """The ``--mixing`` flags supplied (``--mixing`` itself included), for the mode checks."""
    verify: Path | None = None
    """``--verify STORE``: the store whose profiles the freshness probe compares against."""
    threshold: float | None = None
    """``--threshold`` (None when not given: ``DEFAULT_THRESHOLD``)."""
    sweep_given: tuple[str, ...] = ()
    """The sweep options given a value other than their default, for the mode checks."""


def _show(raw: str) -> str:
    """The value as quoted in a message (bounded, so a huge argument cannot flood the terminal)."""
    return repr(raw if len(raw) <= 80 else raw[:77] + "...")


def parse_positive_int(
    option: str, raw: str, *, minimum: int = 1, maximum: int = MAX_TOKENS
) -> int:
    """A positive integer written in decimal digits, from ``minimum`` to ``maximum``."""
    text = raw.strip()
    if not _INTEGER.fullmatch(text):
        kind = "not finite" if _is_non_finite(text) else "not an integer"
        raise ProfileUsageError(f"{option}: {_show(raw)} is {kind}; expected a positive integer")
    value = int(text)
    if value < 1:
        raise ProfileUsageError(f"{option}: {_show(raw)} is not positive")
    if value < minimum:
        raise ProfileUsageError(f"{option}: {value} is below the minimum of {minimum}")
    if value > maximum:
        raise ProfileUsageError(f"{option}: {_show(text)} is above the maximum of {maximum}")
    return value


def parse_int_list(
    option: str, raw: str, *, min_distinct: int, maximum: int = MAX_TOKENS
) -> tuple[int, ...]:
    """A comma-separated list of positive integers up to ``maximum`` (at most MAX_LIST_VALUES
    distinct); returns the distinct values, ascending."""
    if not raw.strip():
        raise ProfileUsageError(
            f"{option}: the list is empty; expected comma-separated positive integers"
        )
    values: list[int] = []
    for item in raw.split(","):
        if not item.strip():
            raise ProfileUsageError(
                f"{option}: {_show(raw)} has an empty item; "
                "expected comma-separated positive integers"
            )
        text = item.strip()
        if not _INTEGER.fullmatch(text):
            kind = "not finite" if _is_non_finite(text) else "not an integer"
            raise ProfileUsageError(
                f"{option}: item {_show(text)} of {_show(raw)} is {kind}; "
                "expected comma-separated positive integers"
            )
        value = int(text)
        if value < 1:
            raise ProfileUsageError(f"{option}: item {_show(text)} of {_show(raw)} is not positive")
        if value > maximum:
            raise ProfileUsageError(
                f"{option}: item {_show(text)} of {_show(raw)} is above the maximum of {maximum}"
            )
        values.append(value)
    distinct = tuple(sorted(set(values)))
    if len(distinct) > MAX_LIST_VALUES:
        raise ProfileUsageError(
            f"{option}: {_show(raw)} holds {len(distinct)} distinct values; "
            f"at most {MAX_LIST_VALUES} are allowed"
        )
    if len(distinct) < min_distinct:
        raise ProfileUsageError(
            f"{option}: {_show(raw)} holds {len(distinct)} distinct value(s); "
            f"at least {min_distinct} are required"
        )
    return distinct


def parse_rate(option: str, raw: str, *, maximum: float = MAX_RATE) -> float:
    """A finite rate greater than zero, at most ``maximum``."""
    try:
        value = float(raw.strip())
    except ValueError:
        raise ProfileUsageError(f"{option}: {_show(raw)} is not a number") from None
    if not math.isfinite(value):
        raise ProfileUsageError(f"{option}: {_show(raw)} is not finite")
    if value <= 0:
        raise ProfileUsageError(f"{option}: {_show(raw)} is not positive")
    if value > maximum:
        raise ProfileUsageError(f"{option}: {_show(raw)} is above the maximum of {maximum:g}")
    return value


def parse_threshold(raw: str) -> float:
    """``--threshold``: a fraction strictly between 0 and 1 (the drift past which an engine
    fails)."""
    try:
        value = float(raw.strip())
    except ValueError:
        raise ProfileUsageError(f"--threshold: {_show(raw)} is not a number") from None
    if not math.isfinite(value) or not 0 < value < 1:
        raise ProfileUsageError(
            f"--threshold: {_show(raw)} is not between 0 and 1 (a drift of 0.10 is 10 %; both "
            "ends excluded)"
        )
    return value


def _sweep_given(raw: RawOptions) -> tuple[str, ...]:
    """The sweep options whose value is not their default (a probe measures the profile's own
    points, so it refuses them)."""
    values = (
        ("--prefill-lens", raw.prefill_lens, DEFAULT_PREFILL_LENS),
        ("--decode-input-lens", raw.decode_input_lens, DEFAULT_DECODE_INPUT_LENS),
        ("--decode-concurrency", raw.decode_concurrency, DEFAULT_DECODE_CONCURRENCY),
        ("--decode-tokens", raw.decode_tokens, DEFAULT_DECODE_TOKENS),
        ("--prefill-repeats", raw.prefill_repeats, DEFAULT_PREFILL_REPEATS),
        ("--decode-repeats", raw.decode_repeats, DEFAULT_DECODE_REPEATS),
    )
    return tuple(flag for flag, value, default in values if value.strip() != default)


def parse_format(raw: str) -> OutputFormat:
    """``text`` or ``json``."""
    for name in _FORMATS:
        if raw == name:
            return name
    raise ProfileUsageError(f"--format: {_show(raw)} is not one of text, json")


def _is_non_finite(text: str) -> bool:
    try:
        return not math.isfinite(float(text))
    except ValueError:
        return False


def _path(raw: str) -> Path:
    if not raw.strip():
        raise ProfileUsageError("a path option was given an empty value")
    return Path(raw)


def _maybe_path(raw: str | None) -> Path | None:
    if raw is None:
        return None
    return _path(raw)


def validate(raw: RawOptions, environ: Mapping[str, str] | None = None) -> ProfileOptions:
    """Check every supplied value (in every mode) and return the typed options.

    ``environ`` is the process environment, which only ``--shard auto`` reads (the command layer
    passes ``os.environ``; None: an empty one).
    """
    parse_format(raw.output_format)  # the command layer picks the format itself, also on errors
    sweep = SweepOptions(
        prefill_lens=parse_int_list(
            "--prefill-lens", raw.prefill_lens, min_distinct=MIN_PREFILL_LENS
        ),
        decode_input_lens=parse_int_list(
            "--decode-input-lens", raw.decode_input_lens, min_distinct=MIN_DECODE_INPUT_LENS
        ),
        decode_concurrency=parse_int_list(
            "--decode-concurrency",
            raw.decode_concurrency,
            min_distinct=MIN_DECODE_CONCURRENCY,
            maximum=MAX_DECODE_CONCURRENCY,
        ),
        decode_tokens=parse_positive_int(
            "--decode-tokens",
            raw.decode_tokens,
            minimum=MIN_DECODE_TOKENS,
            maximum=MAX_DECODE_TOKENS,
        ),
        prefill_repeats=parse_positive_int(
            "--prefill-repeats",
            raw.prefill_repeats,
            minimum=MIN_PREFILL_REPEATS,
            maximum=MAX_PREFILL_REPEATS,
        ),
        decode_repeats=parse_positive_int(
            "--decode-repeats",
            raw.decode_repeats,
            minimum=MIN_DECODE_REPEATS,
            maximum=MAX_DECODE_REPEATS,
        ),
        mixing=None,
    )
    mixing, mixing_given = _mixing(raw)
    if raw.mixing:
        sweep = dataclasses.replace(sweep, mixing=mixing)
    neighbours = NeighbourValues(
        prefill_rps=_maybe_rate("--neighbour-prefill-rps", raw.neighbour_prefill_rps),
        decode_rps=_maybe_rate("--neighbour-decode-rps", raw.neighbour_decode_rps),
        prefill_tokens=_maybe_int("--neighbour-prefill-tokens", raw.neighbour_prefill_tokens),
        decode_input_tokens=_maybe_int(
            "--neighbour-decode-input-tokens", raw.neighbour_decode_input_tokens
        ),
        decode_output_tokens=_maybe_int(
            "--neighbour-decode-output-tokens", raw.neighbour_decode_output_tokens
        ),
    )
    only, merge = tuple(raw.only or ()), tuple(raw.merge or ())
    for iid in only:
        if not iid.strip():
            raise ProfileUsageError("--only: an empty engine id was given")
    if len(merge) != len(set(merge)):
        raise ProfileUsageError("--merge: the same store is named more than once")
    return ProfileOptions(
        fleet=_maybe_path(raw.fleet),
        only=only,
        refit_samples=_maybe_path(raw.refit_samples),
        merge=tuple(_path(p) for p in merge),
        out=_maybe_path(raw.out),
        limits=_maybe_path(raw.limits),
        overwrite=raw.overwrite,
        sweep=sweep,
        colocated=raw.colocated,
        neighbours=neighbours,
        scale=ScaleOut(
            parallel_groups=parse_parallel_groups(raw.parallel_groups),
            shard=None if raw.shard is None else parse_shard(raw.shard, environ or {}),
        ),
        keepalive_expiry_s=None
        if raw.keepalive_expiry is None
        else parse_rate("--keepalive-expiry", raw.keepalive_expiry, maximum=MAX_KEEPALIVE_S),
        mixing_given=mixing_given,
        verify=_maybe_path(raw.verify),
        threshold=None if raw.threshold is None else parse_threshold(raw.threshold),
        sweep_given=_sweep_given(raw),
    )


def _mixing(raw: RawOptions) -> tuple[MixingOptions, tuple[str, ...]]:
    """The mixing options (every given value checked, with or without ``--mixing``) and the
    flags given."""
    values = (raw.mixing_lens, raw.mixing_concurrency, raw.mixing_prefills, raw.mixing_repeats)
    given = tuple(flag for flag, v in zip(MIXING_OPTIONS, values, strict=True) if v is not None)
    defaults = MixingOptions()
    options = MixingOptions(
        lens=None
        if raw.mixing_lens is None
        else parse_int_list("--mixing-lens", raw.mixing_lens, min_distinct=MIN_MIXING_LENS),
        concurrency=defaults.concurrency
        if raw.mixing_concurrency is None
        else parse_positive_int(
            "--mixing-concurrency", raw.mixing_concurrency, maximum=MAX_DECODE_CONCURRENCY
        ),
        prefills=defaults.prefills
        if raw.mixing_prefills is None
        else parse_positive_int(
            "--mixing-prefills", raw.mixing_prefills, maximum=MAX_MIXING_PREFILLS
        ),
        repeats=defaults.repeats
        if raw.mixing_repeats is None
        else parse_positive_int("--mixing-repeats", raw.mixing_repeats, maximum=MAX_MIXING_REPEATS),
    )
    return options, (("--mixing",) if raw.mixing else ()) + given


def _maybe_rate(option: str, raw: str | None) -> float | None:
    if raw is None:
        return None
    return parse_rate(option, raw)


def _maybe_int(option: str, raw: str | None) -> int | None:
    if raw is None:
        return None
    return parse_positive_int(option, raw)


MAX_KEEPALIVE_S = 3600.0
"""The longest ``--keepalive-expiry`` accepted, seconds."""

# Scale-out: GPU groups measured side by side, and a share of the fleet per machine.
MAX_PARALLEL_GROUPS = 256
_SHARD = re.compile(r"\s*([0-9]+)\s*/\s*([0-9]+)\s*")


@dataclass(frozen=True, slots=True)
class Shard:
    """``--shard K/M``: this process measures share ``index`` (1-based) of ``count``.

    ``origin`` is set when ``--shard auto`` read the share from the environment: the variables
    and their values, which messages name.
    """

    index: int
    count: int
    origin: str | None = field(default=None, compare=False)

    def label(self) -> str:
        """``K/M`` (also what the sidecar records for ``--shard auto``)."""
        return f"{self.index}/{self.count}"

    def option(self) -> str:
        """The option as messages quote it: ``--shard K/M``, or ``--shard auto (K/M: ...)``."""
        if self.origin is None:
            return f"--shard {self.label()}"
        return f"--shard auto ({self.label()}: {self.origin})"


@dataclass(frozen=True, slots=True)
class ScaleOut:
    """``--parallel-groups`` (None when not given: one group at a time) and ``--shard``."""

    parallel_groups: int | None = None
    shard: Shard | None = None

    def given(self) -> list[str]:
        """The scale-out options that were supplied."""
        flags = [("--parallel-groups", self.parallel_groups), ("--shard", self.shard)]
        return [flag for flag, value in flags if value is not None]


def parse_shard(raw: str, environ: Mapping[str, str]) -> Shard:
    """``K/M`` with 1 <= K <= M, or ``auto``: the share a Kubernetes Indexed Job's ``environ``
    names (``_shard_env``)."""
    if raw.strip() == "auto":
        share = shard_from_env(environ)
        return Shard(share.index, share.count, origin=share.origin)
    match = _SHARD.fullmatch(raw)
    if match is None:
        raise ProfileUsageError(f"--shard: {_show(raw)} is not K/M (e.g. 1/2) or auto")
    index, count = int(match[1]), int(match[2])
    if count < 1 or not 1 <= index <= count:
        raise ProfileUsageError(f"--shard: {_show(raw)} needs 1 <= K <= M")
    return Shard(index, count)


def parse_parallel_groups(raw: str | None) -> int | None:
    """``--parallel-groups N``: 1 to MAX_PARALLEL_GROUPS (None when not given)."""
    if raw is None:
        return None
    value = parse_positive_int("--parallel-groups", raw)
    if value > MAX_PARALLEL_GROUPS:
        raise ProfileUsageError(
            f"--parallel-groups: {value} is above the maximum of {MAX_PARALLEL_GROUPS}"
        )
    return value
