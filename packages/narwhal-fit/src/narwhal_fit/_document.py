"""The fit document every form shares: writing it, and the checks used when reading it back.

Every read failure raises :class:`FitError` naming the document and the key path of the bad value.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, Protocol

from narwhal_fit._errors import FitError
from narwhal_fit._weighted import METHOD, WEIGHTS

if TYPE_CHECKING:
    from narwhal_fit._residuals import PointResidual

__all__ = [
    "FIT_KEYS",
    "FittedForm",
    "check_keys",
    "get_int",
    "get_list",
    "get_mapping",
    "get_number",
    "read_header",
    "write_document",
]

FIT_KEYS: Final = (
    "form",
    "fit_version",
    "weights",
    "method",
    "x_names",
    "coefficients",
    "domain",
    "residuals",
    "mean_rel_error",
    "worst_rel_error",
    "worst_point",
)
"""The keys of every fit document, in the order :func:`write_document` writes them."""


class FittedForm(Protocol):
    """What :func:`write_document` reads from a fit (``PrefillFit``, ``DecodeFit``)."""

    @property
    def coefficients(self) -> dict[str, float]: ...
    @property
    def residuals(self) -> tuple[PointResidual, ...]: ...
    @property
    def mean_rel_error(self) -> float: ...
    @property
    def worst_rel_error(self) -> float: ...
    @property
    def worst_point(self) -> tuple[float, ...]: ...


def write_document(
    fit: FittedForm,
    *,
    form: str,
    fit_version: int,
    x_names: Sequence[str],
    coefficients: Sequence[str],
    domain: dict[str, Any],
    weights: str = WEIGHTS,
) -> dict[str, Any]:
    """The plain JSON-able dict of ``fit`` (keys :data:`FIT_KEYS`; ``domain`` already plain)."""
    return {
        "form": form,
        "fit_version": fit_version,
        "weights": weights,
        "method": METHOD,
        "x_names": list(x_names),
        "coefficients": {k: fit.coefficients[k] for k in coefficients},
        "domain": domain,
        "residuals": [r.to_dict() for r in fit.residuals],
        "mean_rel_error": fit.mean_rel_error,
        "worst_rel_error": fit.worst_rel_error,
        "worst_point": list(fit.worst_point),
    }


def check_keys(
    d: Mapping[str, Any], where: str, *, required: Sequence[str], optional: Sequence[str] = ()
) -> None:
    """Require every key in ``required`` and refuse keys outside ``required`` + ``optional``."""
    missing = [k for k in required if k not in d]
    if missing:
        raise FitError(f"{where}: missing key(s) {', '.join(repr(k) for k in missing)}")
    allowed = set(required) | set(optional)
    unknown = sorted(str(k) for k in d if k not in allowed)
    if unknown:
        raise FitError(f"{where}: unknown key(s) {', '.join(repr(k) for k in unknown)}")


def get_mapping(d: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any]:
    """Return ``d[key]`` when it is a mapping."""
    value = d[key]
    if not isinstance(value, Mapping):
        raise FitError(f"{where}.{key}: expected an object, got {type(value).__name__}")
    return value


def get_list(d: Mapping[str, Any], key: str, where: str) -> list[Any]:
    """Return ``d[key]`` when it is a list (or tuple)."""
    value = d[key]
    if not isinstance(value, list | tuple):
        raise FitError(f"{where}.{key}: expected a list, got {type(value).__name__}")
    return list(value)


def get_number(value: Any, where: str, *, minimum: float | None = None) -> float:
    """Return ``value`` as a finite float (ints allowed, bools refused), optionally >= minimum."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise FitError(f"{where}: expected a number, got {value!r}")
    number = float(value)
    if not math.isfinite(number):
        raise FitError(f"{where}: expected a finite number, got {value!r}")
    if minimum is not None and number < minimum:
        raise FitError(f"{where}: expected a number >= {minimum:g}, got {value!r}")
    return number


def get_int(value: Any, where: str, *, minimum: int | None = None) -> int:
    """Return ``value`` when it is an int (bools refused), optionally ``>= minimum``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise FitError(f"{where}: expected an integer, got {value!r}")
    if minimum is not None and value < minimum:
        raise FitError(f"{where}: expected an integer >= {minimum}, got {value!r}")
    return value


def read_header(
    d: Any,
    where: str,
    *,
    form: str,
    fit_version: int,
    x_names: Sequence[str],
    coefficients: Sequence[str],
    weights: str = WEIGHTS,
) -> dict[str, float]:
    """Check a fit document's keys (:data:`FIT_KEYS`) and header fields (``weights`` as the form
    writes it); return its coefficients (finite, >= 0)."""
    if not isinstance(d, Mapping):
        raise FitError(f"{where}: expected an object, got {type(d).__name__}")
    check_keys(d, where, required=FIT_KEYS)
    if d["form"] != form:
        raise FitError(f"{where}.form: expected {form!r}, got {d['form']!r}")
    if get_int(d["fit_version"], f"{where}.fit_version") != fit_version:
        raise FitError(f"{where}.fit_version: unsupported version {d['fit_version']!r}")
    for key, want in (("weights", weights), ("method", METHOD), ("x_names", list(x_names))):
        if d[key] != want:
            raise FitError(f"{where}.{key}: expected {want!r}, got {d[key]!r}")
    raw = get_mapping(d, "coefficients", where)
    check_keys(raw, f"{where}.coefficients", required=coefficients)
    return {k: get_number(raw[k], f"{where}.coefficients.{k}", minimum=0.0) for k in coefficients}
