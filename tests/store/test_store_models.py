"""Model strictness: fit documents, keys, samples, timestamps and numbers."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import ValidationError

from narwhal_store import (
    DecodeFitDoc,
    DecodeStream,
    EngineLimits,
    PrefillFitDoc,
    PrefillSample,
    ProfileKey,
    ProfileStore,
)

PairFactory = Callable[..., Any]


def _loc(exc: pytest.ExceptionInfo[ValidationError]) -> tuple[Any, ...]:
    return tuple(exc.value.errors()[0]["loc"])


def test_real_narwhal_fit_documents_round_trip() -> None:
    """narwhal-fit's to_dict() validates as a fit document and dumps back unchanged."""
    narwhal_fit = pytest.importorskip("narwhal_fit")
    fit = narwhal_fit.fit_prefill([256, 1024, 4096, 8192], [0.02, 0.05, 0.2, 0.5])
    doc = fit.to_dict()
    model = PrefillFitDoc.model_validate(doc)
    assert model.to_dict() == doc
    assert math.isclose(model.ttft_s(8192), fit.predict(8192), rel_tol=1e-12)
    assert narwhal_fit.load_fit(model.to_dict()).coefficients == fit.coefficients


def test_fit_docs_check_known_forms_and_keep_unknown_ones() -> None:
    """Known forms need their exact non-negative coefficients; new forms are kept as written."""
    with pytest.raises(ValidationError, match="needs coefficients a, b, c"):
        PrefillFitDoc.model_validate(
            {"form": "ttft-quadratic-v1", "coefficients": {"a": 1.0}, "domain": {}}
        )
    with pytest.raises(ValidationError, match="must be >= 0"):
        DecodeFitDoc.model_validate(
            {
                "form": "tpot-batch-context-v1",
                "coefficients": {"d0": 0.1, "d1": -0.1, "d2": 0},
                "domain": {},
            }
        )
    with pytest.raises(ValidationError, match="mean_rel_error"):
        PrefillFitDoc.model_validate(
            {
                "form": "ttft-quadratic-v1",
                "coefficients": {"a": 0, "b": 0, "c": 0},
                "domain": {},
                "mean_rel_error": "low",
            }
        )
    future = {"form": "ttft-cubic-v9", "coefficients": {"k": 2}, "domain": {"x": 1}, "note": "n"}
    model = PrefillFitDoc.model_validate(future)
    assert model.to_dict() == {**future, "coefficients": {"k": 2.0}}
    with pytest.raises(ValueError, match="knows form ttft-quadratic-v1"):
        model.ttft_s(10)
    decode = DecodeFitDoc.model_validate(
        {"form": "tpot-batch-context-v1", "coefficients": {"d0": 1, "d1": 2, "d2": 3}, "domain": {}}
    )
    assert decode.tpot_s(2, 10) == 1 + 2 * 2 + 3 * 2 * 10


def test_profile_key_target_must_be_in_split() -> None:
    """A target role absent from the role split is an error at key.target_role."""
    with pytest.raises(ValidationError, match="does not occur in role_split"):
        ProfileKey(engine="e", gpu_group=None, role_split={"decode": 1}, target_role="prefill")
    key = ProfileKey(
        engine="e", gpu_group="g", role_split={"prefill": 2, "decode": 1}, target_role="decode"
    )
    other = ProfileKey(
        engine="e", gpu_group="g", role_split={"decode": 1, "prefill": 2}, target_role="decode"
    )
    assert key.ident() == other.ident()
    assert key.label() == "e (group g, decode=1+prefill=2, target decode)"


def test_sample_lists_must_line_up() -> None:
    """Timings and request ids, chunk times and token counts must pair one to one."""
    with pytest.raises(ValidationError) as caught:
        PrefillSample(length=8, ttft_s=[0.1, 0.2], request_ids=["a"])
    assert _loc(caught) == ()
    assert "1 request id(s) for 2 timing(s)" in str(caught.value)
    with pytest.raises(ValidationError, match="token count"):
        DecodeStream(request_id="r", send_ns=0, chunk_ns=[1, 2], chunk_tokens=[1])


def test_strict_numbers() -> None:
    """Ints are accepted as floats, but no other coercion: bools, strings, floats-for-ints, NaN."""
    assert PrefillSample(length=8, ttft_s=[1], request_ids=["a"]).ttft_s == [1.0]
    for bad in (True, "8", 8.0, 0):
        with pytest.raises(ValidationError):
            EngineLimits.model_validate({"max_num_seqs": bad})
    with pytest.raises(ValidationError, match="finite"):
        PrefillSample(length=8, ttft_s=[math.nan], request_ids=["a"])


def test_store_header_checks(make_pair: PairFactory) -> None:
    """Timestamps need a UTC offset; duplicate profile keys are refused at their path."""
    store, _ = make_pair()
    doc = store.model_dump(mode="json")
    with pytest.raises(ValidationError, match="no UTC offset"):
        ProfileStore.model_validate({**doc, "created_at": "2026-11-30T05:00:00"})
    with pytest.raises(ValidationError, match="not an ISO 8601"):
        ProfileStore.model_validate({**doc, "created_at": "yesterday"})
    dup = {**doc, "profiles": [doc["profiles"][0], doc["profiles"][1], doc["profiles"][0]]}
    with pytest.raises(ValidationError, match=r"profiles\[2\]\.key: duplicate profile key"):
        ProfileStore.model_validate(dup)
