"""Round trips of fit documents and refusal of malformed ones."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from narwhal_fit import (
    DECODE_FORM,
    FORMS,
    MIXING_FORM,
    PREFILL_FORM,
    DecodeFit,
    DecodePoint,
    FitError,
    PrefillFit,
    fit_decode,
    fit_prefill,
    load_fit,
)


def _prefill() -> PrefillFit:
    return fit_prefill([256, 1024, 4096, 8192], [0.021, 0.035, 0.11, 0.24])


def _decode() -> DecodeFit:
    return fit_decode(
        [
            DecodePoint(1, 575.5, 0.0049, input_len=512),
            DecodePoint(16, 575.5, 0.0054, input_len=512),
            DecodePoint(1, 8255.5, 0.0050, input_len=8192),
            DecodePoint(16, 8255.5, 0.0096, input_len=8192),
        ]
    )


def _plain(value: Any) -> bool:
    """True when value holds only str, int, float, list and dict (no numpy, no tuples)."""
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_plain(v) for v in value)
    return type(value) in (str, int, float)


@pytest.mark.parametrize("make", [_prefill, _decode])
def test_round_trip_through_json(make: Any) -> None:
    """to_dict -> JSON -> load_fit gives an equal fit and the same document."""
    fit = make()
    doc = fit.to_dict()
    assert _plain(doc)
    text = json.dumps(doc, allow_nan=False)
    again = load_fit(json.loads(text))
    assert type(again) is type(fit)
    assert again == fit
    assert again.to_dict() == doc
    assert type(fit).from_dict(json.loads(text)) == fit


def test_document_records_form_and_weighting() -> None:
    """Documents carry form, fit version, weighting and method."""
    doc = _prefill().to_dict()
    assert doc["form"] == PREFILL_FORM
    assert doc["weights"] == "1/y"
    assert doc["fit_version"] == 1
    assert doc["method"] == "nnls"
    assert _decode().to_dict()["form"] == DECODE_FORM
    assert sorted(FORMS) == [MIXING_FORM, DECODE_FORM, PREFILL_FORM]


def test_unknown_form_named() -> None:
    """An unknown form is refused naming it."""
    doc = _prefill().to_dict()
    doc["form"] = "ttft-cubic-v9"
    with pytest.raises(FitError, match="unknown fit form 'ttft-cubic-v9'"):
        load_fit(doc)


def test_missing_form_and_non_mapping() -> None:
    """A document without a form, or not an object, is refused."""
    doc = _prefill().to_dict()
    del doc["form"]
    with pytest.raises(FitError, match="missing key 'form'"):
        load_fit(doc)
    with pytest.raises(FitError, match="expected an object"):
        load_fit([1, 2])  # type: ignore[arg-type]


def _tampered(path: list[Any], value: Any, *, make: Any = _prefill) -> dict[str, Any]:
    doc: dict[str, Any] = copy.deepcopy(make().to_dict())
    target: Any = doc
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return doc


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (["coefficients", "b"], -1e-5, r"coefficients\.b"),
        (["coefficients", "c"], "big", r"coefficients\.c"),
        (["coefficients", "a"], 0.5, r"residuals\[0\]\.predicted.*coefficients"),
        (["residuals", 0, "x"], [256.5], r"residuals\[0\]\.x\[0\]"),
        (["residuals", 0, "rel_error"], 0.9, r"residuals\[0\]\.rel_error"),
        (["residuals", 1, "observed"], 0.0, r"residuals\[1\]\.observed"),
        (["mean_rel_error"], 0.5, "mean_rel_error"),
        (["worst_point"], [8192], "worst_point"),
        (["fit_version"], 2, "fit_version"),
        (["weights"], "1/y^2", "weights"),
        (["domain", "max_len"], 9000, r"domain\.max_len"),
        (["domain", "lengths"], [256, 1024, 2048, 8192], "residuals"),
        (["domain", "lengths"], [256, 1024, 4096], r"domain\.max_len"),
        (["domain", "lengths"], [], "at least 3 lengths"),
    ],
)
def test_tampered_prefill_document_refused(path: list[Any], value: Any, message: str) -> None:
    """A prefill document with a bad or inconsistent value is refused naming the key."""
    with pytest.raises(FitError, match=message):
        load_fit(_tampered(path, value))


def test_tampered_decode_document_refused() -> None:
    """A decode document whose domain disagrees with its points is refused."""
    with pytest.raises(FitError, match=r"domain\.ctx_max"):
        load_fit(_tampered(["domain", "ctx_max"], 1.0, make=_decode))
    with pytest.raises(FitError, match=r"residuals\[0\]\.x"):
        load_fit(_tampered(["residuals", 0, "x"], [1], make=_decode))
    with pytest.raises(FitError, match="no points"):
        load_fit(_tampered(["residuals"], [], make=_decode))


def test_unknown_key_refused() -> None:
    """Unknown keys are refused so a typo cannot pass silently."""
    doc = _prefill().to_dict()
    doc["medians"] = {}
    with pytest.raises(FitError, match=r"unknown key.*'medians'"):
        load_fit(doc)
    doc = _decode().to_dict()
    doc["coefficients"]["d3"] = 0.0
    with pytest.raises(FitError, match="'d3'"):
        load_fit(doc)


def test_from_dict_checks_form() -> None:
    """PrefillFit.from_dict refuses a decode document."""
    with pytest.raises(FitError, match="expected 'ttft-quadratic-v1'"):
        PrefillFit.from_dict(_decode().to_dict())
