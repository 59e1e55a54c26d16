"""Synthetic arrivals and request lengths: the alternatives to a trace's own (``_trace``).

Arrivals (``arrival_offsets_s``), seconds after the first request, which is at 0.0:

- ``constant``: request i at ``i / rate``, on the nanosecond grid of the runbook trial's schedule
  (``due_offsets_ns``): ``offsets_ns`` of these offsets is exactly ``due_offsets_ns``.
  They differ from the float ``i / rate`` by less than half a nanosecond.
- ``poisson``: exponential gaps of mean ``1 / rate``.
- ``gamma``: gamma gaps of mean ``1 / rate`` and coefficient of variation ``burstiness`` (shape
  ``k = 1 / CV²``, scale ``1 / (rate k)``; 1 by default). CV 1 is Poisson; above 1 the arrivals
  come in bursts, below 1 they are more regular. Note: vLLM's ``--burstiness`` is the shape ``k``
  itself (CV ``1 / sqrt(k)``); here it is the CV.

Lengths (``draw_lengths``) from a ``LengthSpec``, written (``parse_length_spec``) as:

- ``N`` or ``fixed:N``: every request N tokens (today's workloads);
- ``uniform:LO-HI``: integers from LO to HI, both included;
- ``normal:MEAN,SD``: normal draws rounded to integers, clipped to at least 1;
- ``lognormal:MEDIAN,SIGMA``: ``MEDIAN x exp(SIGMA x z)`` rounded, clipped to at least 1 (SIGMA:
  the standard deviation of the log).

Random draws use ``numpy.random.default_rng(seed)``: the same seed gives the same array.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal, get_args

import numpy as np

from narwhal_trial._errors import TrialUsageError
from narwhal_trial.workload._schedule import due_offsets_ns

ArrivalKind = Literal["constant", "poisson", "gamma"]
LengthKind = Literal["fixed", "uniform", "normal", "lognormal"]

Offsets = np.ndarray[Any, np.dtype[np.float64]]
Lengths = np.ndarray[Any, np.dtype[np.int64]]


def _check_count(n: int) -> None:
    if n < 0:
        raise TrialUsageError(f"the number of requests must not be negative, got {n}")


def arrival_offsets_s(
    n: int,
    rate: float,
    kind: ArrivalKind = "constant",
    *,
    burstiness: float | None = None,
    seed: int = 0,
) -> Offsets:
    """``n`` arrival offsets in seconds (float64, the first at 0.0), ``rate`` requests a second
    on average; see the module's docstring for the kinds. ``burstiness`` is for ``gamma`` only."""
    _check_count(n)
    if not (math.isfinite(rate) and rate > 0):
        raise TrialUsageError(f"the arrival rate must be a number > 0 per second, got {rate}")
    if kind != "gamma" and burstiness is not None:
        raise TrialUsageError(f"burstiness applies to gamma arrivals only, not {kind}")
    if kind == "constant":
        return np.asarray(due_offsets_ns(n, rate), dtype=np.float64) / 1e9
    if kind not in ("poisson", "gamma"):
        raise TrialUsageError(f"unknown arrival kind {kind!r}: constant, poisson or gamma")
    rng = np.random.default_rng(seed)
    out = np.zeros(n, dtype=np.float64)
    if kind == "poisson":
        gaps = rng.exponential(1.0 / rate, size=max(n - 1, 0))
    else:
        cv = 1.0 if burstiness is None else burstiness
        if not (math.isfinite(cv) and cv > 0):
            raise TrialUsageError(
                f"burstiness (the gaps' coefficient of variation) must be > 0, got {cv}"
            )
        shape = 1.0 / (cv * cv)
        gaps = rng.gamma(shape, 1.0 / (rate * shape), size=max(n - 1, 0))
    np.cumsum(gaps, out=out[1:])
    return out


def offsets_ns(offsets: Offsets) -> list[int]:
    """Offsets in seconds as the schedule's integer nanoseconds (rounded to the nearest)."""
    return [int(x) for x in np.rint(offsets * 1e9).astype(np.int64)]


@dataclass(frozen=True, slots=True)
class LengthSpec:
    """How long each request is: ``kind`` and its two parameters ``a`` and ``b``.

    fixed: ``a`` tokens (``b`` unused, 0); uniform: ``a`` LO, ``b`` HI; normal: ``a`` MEAN, ``b``
    SD; lognormal: ``a`` MEDIAN, ``b`` SIGMA. ``str()`` gives the text ``parse_length_spec``
    reads."""

    kind: LengthKind
    a: float
    b: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "a", float(self.a))  # an int given as a float: one type only
        object.__setattr__(self, "b", float(self.b))
        problem = _spec_problem(self.kind, self.a, self.b)
        if problem:
            raise ValueError(f"{self}: {problem}")

    def __str__(self) -> str:
        if self.kind == "fixed":
            return f"{self.a:g}"
        sep = "-" if self.kind == "uniform" else ","
        return f"{self.kind}:{self.a:g}{sep}{self.b:g}"


def _spec_problem(kind: LengthKind, a: float, b: float) -> str | None:
    if not (math.isfinite(a) and math.isfinite(b)):
        return "parameters must be finite numbers"
    if kind in ("fixed", "uniform"):
        if not (a.is_integer() and b.is_integer()):
            return "token counts must be integers"
        if a < 1:
            return f"lengths must be at least 1 token, got {a:g}"
        if kind == "uniform" and b < a:
            return f"HI ({b:g}) must not be below LO ({a:g})"
        return None
    if a <= 0:
        what = "MEAN" if kind == "normal" else "MEDIAN"
        return f"{what} must be > 0, got {a:g}"
    if b < 0:
        what = "SD" if kind == "normal" else "SIGMA"
        return f"{what} must not be negative, got {b:g}"
    return None


_MAX_LENGTH = 2**40  # a bound for the cast to int64 only (a lognormal's tail can overflow it)
_FORMS = "N, uniform:LO-HI, normal:MEAN,SD or lognormal:MEDIAN,SIGMA"


def parse_length_spec(text: str, flag: str) -> LengthSpec:
    """A ``LengthSpec`` from its text (module docstring); a one-line TrialUsageError naming
    ``flag`` and the bad text otherwise."""
    name, sep, rest = text.strip().partition(":")
    if not sep:
        name, rest = "fixed", name
    kinds: dict[str, LengthKind] = {k: k for k in get_args(LengthKind)}
    if name not in kinds:
        raise TrialUsageError(f"{flag} {text!r}: unknown length kind {name!r}; use {_FORMS}")
    kind = kinds[name]
    parts = [rest] if kind == "fixed" else rest.split("-" if kind == "uniform" else ",")
    try:
        values = [float(part) for part in parts]
    except ValueError:
        values = []
    if len(values) != (1 if kind == "fixed" else 2):
        raise TrialUsageError(f"{flag} {text!r}: not a length; use {_FORMS}")
    a, b = values[0], values[1] if len(values) == 2 else 0.0
    problem = _spec_problem(kind, a, b)
    if problem:
        raise TrialUsageError(f"{flag} {text!r}: {problem}")
    return LengthSpec(kind, a, b)


def draw_lengths(n: int, spec: LengthSpec, seed: int = 0) -> Lengths:
    """``n`` lengths (int64, each at least 1) drawn from ``spec`` with ``default_rng(seed)``."""
    _check_count(n)
    if spec.kind == "fixed":
        return np.full(n, int(spec.a), dtype=np.int64)
    rng = np.random.default_rng(seed)
    if spec.kind == "uniform":
        return rng.integers(int(spec.a), int(spec.b), size=n, endpoint=True, dtype=np.int64)
    if spec.kind == "normal":
        draws = rng.normal(spec.a, spec.b, size=n)
    else:
        draws = rng.lognormal(math.log(spec.a), spec.b, size=n)
    return np.clip(np.rint(draws), 1, _MAX_LENGTH).astype(np.int64)
