"""narwhal-store's copy of the fit forms (names, coefficients, formulas, trust bounds) equals
narwhal-fit's: the format's facts live in both, so reading a store needs no numerical library."""

from __future__ import annotations

import itertools

import pytest

import narwhal_fit
from narwhal_store import _forms as store_forms

NAMES = [
    "PREFILL_FORM",
    "PREFILL_COEFFICIENTS",
    "DECODE_FORM",
    "DECODE_COEFFICIENTS",
    "MIXING_FORM",
    "MIXING_COEFFICIENTS",
]


@pytest.mark.parametrize("name", NAMES)
def test_the_names_agree(name: str) -> None:
    """Each form's name and coefficient names are the same in both packages."""
    assert getattr(store_forms, name) == getattr(narwhal_fit, name)


def test_the_trust_bounds_agree() -> None:
    """The store's trust bounds are the prefill gate's defaults."""
    assert store_forms.FIT_MEAN_BOUND == narwhal_fit.DEFAULT_MEAN_LIMIT
    assert store_forms.FIT_WORST_BOUND == narwhal_fit.DEFAULT_WORST_LIMIT


def test_the_formulas_agree() -> None:
    """Both evaluate a fit to the same seconds over a grid of coefficients and inputs."""
    values = [0.0, 1e-9, 3e-6, 0.002, 0.25]
    for a, b, c in itertools.product(values, repeat=3):
        prefill = {"a": a, "b": b, "c": c}
        for length in (1, 512, 8192, 131072):
            assert store_forms.ttft_quadratic_s(prefill, length) == narwhal_fit.ttft_quadratic_s(
                prefill, length
            )
        decode = {"d0": a, "d1": b, "d2": c}
        for n, ctx in itertools.product((1, 4, 64), (16.0, 4096.5, 100000.0)):
            assert store_forms.tpot_batch_context_s(
                decode, n, ctx
            ) == narwhal_fit.tpot_batch_context_s(decode, n, ctx)
