"""Reading any fit document: dispatch on its ``form`` name."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, Final

from narwhal_fit._decode import DECODE_FORM, DecodeFit
from narwhal_fit._errors import FitError
from narwhal_fit._mixing import MIXING_FORM, MixingFit
from narwhal_fit._prefill import PREFILL_FORM, PrefillFit

__all__ = ["FORMS", "AnyFit", "load_fit"]

AnyFit = PrefillFit | DecodeFit | MixingFit
"""A fit of any known form."""

FORMS: Final[Mapping[str, Callable[[Mapping[str, Any]], AnyFit]]] = MappingProxyType(
    {
        PREFILL_FORM: PrefillFit.from_dict,
        DECODE_FORM: DecodeFit.from_dict,
        MIXING_FORM: MixingFit.from_dict,
    }
)
"""Known form names and their readers (read-only). New forms get new names."""


def load_fit(d: Mapping[str, Any]) -> AnyFit:
    """Rebuild a fit from its ``to_dict()`` document, choosing the class by ``d["form"]``.

    An unknown or missing form, or a malformed document, raises :class:`FitError`.
    """
    if not isinstance(d, Mapping):
        raise FitError(f"fit document: expected an object, got {type(d).__name__}")
    if "form" not in d:
        raise FitError("fit document: missing key 'form'")
    form = d["form"]
    reader = FORMS.get(form) if isinstance(form, str) else None
    if reader is None:
        known = ", ".join(sorted(FORMS))
        raise FitError(f"unknown fit form {form!r} (known forms: {known})")
    return reader(d)
