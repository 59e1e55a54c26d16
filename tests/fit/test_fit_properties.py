"""Hypothesis property tests: recovery under noise, non-negativity, gate rejection, round trips."""

from __future__ import annotations

import json

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from narwhal_fit import (
    DecodePoint,
    NeedsMoreTokensError,
    StreamTimes,
    cohort_tpot,
    decode_window,
    fit_decode,
    fit_prefill,
    gate_prefill,
    load_fit,
)

SETTINGS = settings(max_examples=40, deadline=None)
SWEEP = [256, 512, 1024, 2048, 4096, 8192, 12288, 16384]
NOISE = 0.03
# With +-3% noise on each point the fitted curve stays close to the truth at the measured points
# (a projection can move a point by more than its own noise). Worst cases found by searching
# +-3% sign patterns: prefill 4.8% (exhaustive over the sweep), decode 5.5% (20,000 random grids).
PREFILL_TOLERANCE = 0.06
DECODE_TOLERANCE = 0.07

lengths_st = st.lists(st.sampled_from(SWEEP), min_size=3, max_size=8, unique=True).map(sorted)
noise_st = st.floats(min_value=-NOISE, max_value=NOISE)


@SETTINGS
@given(
    a=st.floats(0.010, 0.030),
    b=st.floats(1e-5, 3e-5),
    c=st.floats(1e-10, 1e-9),
    lengths=lengths_st,
    data=st.data(),
)
def test_prefill_recovers_known_quadratic(
    a: float, b: float, c: float, lengths: list[int], data: st.DataObject
) -> None:
    """Noisy samples of a plausible quadratic fit back to it and pass the gate."""
    x = np.array(lengths, dtype=np.float64)
    truth = a + b * x + c * x * x
    noise = np.array(data.draw(st.lists(noise_st, min_size=len(x), max_size=len(x))))
    fit = fit_prefill(lengths, (truth * (1.0 + noise)).tolist())
    assert all(v >= 0.0 for v in fit.coefficients.values())
    assert np.all(np.abs(fit.predict_many(x) - truth) / truth <= PREFILL_TOLERANCE)
    assert gate_prefill(fit).passed
    assert fit.worst_rel_error <= 2 * NOISE + 1e-9


@SETTINGS
@given(
    d0=st.floats(4e-3, 8e-3),
    d1=st.floats(0.0, 1e-5),
    d2=st.floats(1e-8, 5e-8),
    concurrency=st.lists(
        st.sampled_from([1, 2, 4, 8, 16, 32, 48]), min_size=2, max_size=4, unique=True
    ),
    input_lens=st.lists(
        st.sampled_from([512, 1024, 4096, 8192]), min_size=2, max_size=3, unique=True
    ),
    data=st.data(),
)
def test_decode_recovers_known_surface(
    d0: float,
    d1: float,
    d2: float,
    concurrency: list[int],
    input_lens: list[int],
    data: st.DataObject,
) -> None:
    """Noisy cohort points of a plausible surface fit back to it within tolerance."""
    grid = [(n, isl + 31.5) for n in concurrency for isl in input_lens]
    truth = np.array([d0 + d1 * n + d2 * n * ctx for n, ctx in grid])
    noise = np.array(data.draw(st.lists(noise_st, min_size=len(grid), max_size=len(grid))))
    observed = truth * (1.0 + noise)
    fit = fit_decode(
        [DecodePoint(n, ctx, float(y)) for (n, ctx), y in zip(grid, observed, strict=True)]
    )
    assert all(v >= 0.0 for v in fit.coefficients.values())
    predicted = fit.predict_many([n for n, _ in grid], [ctx for _, ctx in grid])
    assert np.all(np.abs(predicted - truth) / truth <= DECODE_TOLERANCE)


positive_st = st.floats(min_value=1e-4, max_value=10.0)


@SETTINGS
@given(lengths=lengths_st, data=st.data())
def test_prefill_coefficients_never_negative(lengths: list[int], data: st.DataObject) -> None:
    """Any positive TTFTs give non-negative coefficients and non-negative predictions."""
    ys = data.draw(st.lists(positive_st, min_size=len(lengths), max_size=len(lengths)))
    fit = fit_prefill(lengths, ys)
    assert all(v >= 0.0 for v in fit.coefficients.values())
    assert all(r.predicted >= 0.0 for r in fit.residuals)


@SETTINGS
@given(
    points=st.lists(
        st.tuples(st.integers(1, 64), st.floats(0.0, 20000.0), positive_st),
        min_size=2,
        max_size=12,
    ).filter(lambda ps: len({n for n, _, _ in ps}) >= 2)
)
def test_decode_coefficients_never_negative(points: list[tuple[int, float, float]]) -> None:
    """Any positive TPOTs give non-negative coefficients."""
    fit = fit_decode([DecodePoint(n, ctx, y) for n, ctx, y in points])
    assert all(v >= 0.0 for v in fit.coefficients.values())


@SETTINGS
@given(
    lengths=lengths_st,
    data=st.data(),
    ratio=st.floats(4.0, 50.0),
)
def test_gate_rejects_data_that_falls_with_length(
    lengths: list[int], data: st.DataObject, ratio: float
) -> None:
    """If some shorter length is >= 4x slower than a longer one, no quadratic passes the gate.

    A non-negative quadratic never decreases for L > 0, so it either misses the slow short
    point by more than half or overshoots the fast long point by at least 100%.
    """
    ys = data.draw(st.lists(st.floats(0.01, 1.0), min_size=len(lengths), max_size=len(lengths)))
    i = data.draw(st.integers(0, len(lengths) - 2))
    j = data.draw(st.integers(i + 1, len(lengths) - 1))
    ys[i] = ys[j] * ratio
    verdict = gate_prefill(fit_prefill(lengths, ys))
    assert not verdict.passed
    assert verdict.worst > 0.5
    assert verdict.reason is not None and "worst-point" in verdict.reason


@SETTINGS
@given(lengths=lengths_st, data=st.data())
def test_prefill_round_trip(lengths: list[int], data: st.DataObject) -> None:
    """Any prefill fit survives to_dict -> JSON -> load_fit unchanged."""
    ys = data.draw(st.lists(positive_st, min_size=len(lengths), max_size=len(lengths)))
    fit = fit_prefill(lengths, ys)
    assert load_fit(json.loads(json.dumps(fit.to_dict(), allow_nan=False))) == fit


@st.composite
def chunked_stream(draw: st.DrawFn, start_ns: int) -> tuple[list[int], list[int]]:
    """Chunk arrival times (strictly increasing) and token counts (1-3) for one stream."""
    chunks = draw(st.integers(3, 40))
    gaps = draw(st.lists(st.integers(1_000_000, 20_000_000), min_size=chunks, max_size=chunks))
    tokens = draw(st.lists(st.integers(1, 3), min_size=chunks, max_size=chunks))
    times = (start_ns + np.cumsum([0, *gaps[1:]])).tolist()
    return [int(t) for t in times], tokens


@SETTINGS
@given(data=st.data(), n=st.integers(1, 6))
def test_cohort_tpot_matches_definition(data: st.DataObject, n: int) -> None:
    """Per-stream TPOT is the window span over the tokens delivered after its first instant."""
    raw = [data.draw(chunked_stream(data.draw(st.integers(0, 50_000_000)))) for _ in range(n)]
    streams = [StreamTimes.from_chunks(ns, tokens) for ns, tokens in raw]
    window = decode_window(streams)
    inside = [[t for t in s.token_ns if window.start_ns <= t <= window.end_ns] for s in streams]
    after = [sum(1 for x in t if x > t[0]) if t else 0 for t in inside]
    measurable = all(k >= 2 for k in after)
    try:
        cohort = cohort_tpot(streams, window)
    except NeedsMoreTokensError as exc:
        assert "--decode-tokens" in str(exc)
        assert not measurable
        return
    assert measurable
    want = [(t[-1] - t[0]) / k / 1e9 for t, k in zip(inside, after, strict=True)]
    assert np.allclose(cohort.per_stream, want)
    assert cohort.tpot_s == np.median(want)
    assert cohort.tokens_in_window == tuple(len(t) for t in inside)
