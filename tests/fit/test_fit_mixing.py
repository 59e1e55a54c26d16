"""Unit tests for the mixing form mixing-share-step-v1: the loss estimator and the fit."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest

from narwhal_fit import (
    FORMS,
    MIXING_FLOOR_S,
    MIXING_FORM,
    MIXING_RELATIVE_FLOOR,
    MIXING_WEIGHTS,
    FitError,
    InsufficientDataError,
    MixingFit,
    MixingPoint,
    StreamTimes,
    fit_mixing,
    load_fit,
    mixing_floor_s,
    mixing_loss,
    prefill_chunks,
    prefill_work_s,
)

MS = 1_000_000


def _stream(
    tokens: int,
    *,
    interval_ms: float = 5.0,
    gaps_after: Sequence[int] = (),
    gap_ms: float = 100.0,
    offset_ms: float = 0.0,
    per_chunk: int = 1,
) -> StreamTimes:
    """Token times: one chunk of ``per_chunk`` tokens every ``per_chunk * interval_ms``, with
    ``gap_ms`` more before the chunk following each chunk index in ``gaps_after``."""
    times: list[int] = []
    t = offset_ms
    for chunk in range(tokens // per_chunk):
        if chunk > 0:
            t += per_chunk * interval_ms + (gap_ms if chunk - 1 in gaps_after else 0.0)
        times.extend([round(t * MS)] * per_chunk)
    return StreamTimes(times)


def _at(stream: StreamTimes, index: int) -> int:
    return stream.token_ns[index]


def test_a_100ms_gap_per_prefill_is_a_100ms_loss() -> None:
    """5 ms intervals except a 100 ms gap per prefill (4 prefills): 0.1 s per prefill, for every
    stream; the quiet pace is the 5 ms and the stretch counts its tokens."""
    gaps = (100, 140, 180, 220)
    streams = [_stream(400, gaps_after=gaps, offset_ms=k * 0.5) for k in range(4)]
    first_send = _at(streams[0], 100) + MS // 2  # just after token 100: the gap follows it
    last_first = _at(streams[0], 221) - MS // 2  # the last prefill's token comes with the gap
    loss = mixing_loss(streams, first_send, last_first, 4)
    assert loss.loss_s == pytest.approx(0.1, abs=1e-9)
    assert loss.prefills == 4
    assert loss.quiet_s == pytest.approx((0.005,) * 4, abs=1e-12)
    for stream_loss in loss.stream_loss_s:
        assert stream_loss == pytest.approx(0.4, abs=1e-9)
    assert loss.intervals[0] == 221 - 100


def test_streams_without_prefill_lose_nothing() -> None:
    """Decode streams whose pace never changes: ~0 loss, whatever stretch is picked."""
    streams = [_stream(300, offset_ms=k * 1.3) for k in range(3)]
    loss = mixing_loss(streams, _at(streams[0], 80) + MS, _at(streams[0], 200) + MS, 4)
    assert loss.loss_s == pytest.approx(0.0, abs=1e-9)


def test_tokens_are_counted_not_chunks() -> None:
    """Two tokens per chunk every 10 ms (5 ms a token), one 60 ms gap: 60 ms lost."""
    streams = [_stream(400, per_chunk=2, gaps_after=(90,), gap_ms=60.0)]
    first_send = _at(streams[0], 181) + MS  # chunk 90 holds tokens 180 and 181
    last_first = _at(streams[0], 182) - MS
    loss = mixing_loss(streams, first_send, last_first, 1)
    assert loss.loss_s == pytest.approx(0.060, abs=1e-9)
    assert loss.quiet_s == pytest.approx(
        (0.005,),
    )


def test_a_pace_drifting_with_context_averages_out() -> None:
    """Intervals growing steadily (context grows): the quiet pace is read on equally long spans
    on both sides of the stretch, so the loss stays near the gaps' 50 ms."""
    times: list[int] = []
    t = 0.0
    for i in range(600):
        if i:
            t += 5.0 + 0.004 * i + (50.0 if i == 301 else 0.0)
        times.append(round(t * MS))
    stream = StreamTimes(times)
    loss = mixing_loss([stream], times[300] + MS, times[301] - MS, 1)
    assert loss.loss_s == pytest.approx(0.050, abs=2e-4)


def test_negative_noise_is_kept() -> None:
    """A stretch a little faster than the quiet pace gives a small negative loss, not an error."""
    times = [round(i * 5.0 * MS) for i in range(100)]
    times[50:] = [t - MS for t in times[50:]]  # one interval 1 ms short inside the stretch
    loss = mixing_loss([StreamTimes(times)], times[45] + 1, times[55] - 1, 1)
    assert loss.loss_s == pytest.approx(-0.001, abs=1e-9)


@pytest.mark.parametrize(
    ("first", "last", "prefills", "message"),
    [
        (10, 20, 1, "no token before the first prefill was sent"),
        (300, 2000, 1, "ended before the last prefill's first token"),
        (300, 200, 1, "comes before the first prefill's send"),
        (300, 400, 0, "prefills must be a positive integer"),
    ],
)
def test_loss_refusals(first: int, last: int, prefills: int, message: str) -> None:
    """What the estimator cannot use is named (times in ms on a stream starting at 100 ms)."""
    stream = _stream(200, offset_ms=100.0)
    with pytest.raises(InsufficientDataError, match=message):
        mixing_loss([stream], first * MS, last * MS, prefills)


def test_loss_needs_a_quiet_interval() -> None:
    """A stretch covering the whole window leaves no quiet pace to compare with."""
    stream = StreamTimes([0, 5 * MS, 10 * MS])
    with pytest.raises(InsufficientDataError, match="quiet pace is unknown"):
        mixing_loss([stream], 1, 9 * MS, 1)
    with pytest.raises(InsufficientDataError, match="at least one decode stream"):
        mixing_loss([], 1, 2, 1)


def _exact(share: float, step_s: float) -> list[MixingPoint]:
    points = []
    for length, chunks in ((256, 1), (4096, 1), (8192, 1), (16384, 2), (24576, 3)):
        work = prefill_work_s({"b": 1.9e-5, "c": 5.1e-10}, length)
        loss = share * work + step_s * chunks
        points.append(MixingPoint(work, chunks, loss, prefill_len=length, input_len=512))
    return points


def test_fit_recovers_share_and_step_from_exact_points() -> None:
    """Noise-free points give back share and step_s; the domain lists what was measured."""
    fit = fit_mixing(_exact(0.97, 0.0008))
    assert fit.form == MIXING_FORM
    assert fit.coefficients["share"] == pytest.approx(0.97, rel=1e-9)
    assert fit.coefficients["step_s"] == pytest.approx(0.0008, rel=1e-6)
    assert fit.worst_rel_error < 1e-9
    assert fit.domain["chunks"] == [1, 2, 3]
    assert fit.domain["prefill_lens"] == [256, 4096, 8192, 16384, 24576]
    assert fit.domain["input_lens"] == [512]
    smallest = prefill_work_s({"b": 1.9e-5, "c": 5.1e-10}, 256)
    assert fit.domain["work_s_min"] == pytest.approx(smallest)
    assert [r.x[0] for r in fit.residuals] == [1, 1, 1, 2, 3]
    assert fit.predict(0.1, 2) == pytest.approx(0.97 * 0.1 + 2 * 0.0008)


def test_fit_of_an_engine_that_takes_turns() -> None:
    """A scheduler whose decode steps wait out whole prefill steps: share 1, step_s a step's d0."""
    fit = fit_mixing(_exact(1.0, 0.0053))
    assert fit.coefficients["share"] == pytest.approx(1.0, rel=1e-9)
    assert fit.coefficients["step_s"] == pytest.approx(0.0053, rel=1e-9)


def test_round_trip_through_dict_and_load_fit() -> None:
    """to_dict/from_dict/load_fit give back an equal fit; the document records its weighting."""
    fit = fit_mixing(_exact(0.9, 0.001))
    doc = fit.to_dict()
    assert doc["weights"] == MIXING_WEIGHTS
    assert doc["x_names"] == ["chunks", "work_s"]
    assert MixingFit.from_dict(doc) == fit
    assert load_fit(doc) == fit
    assert FORMS[MIXING_FORM] == MixingFit.from_dict


def test_points_without_lengths_have_no_length_domain() -> None:
    """prefill_lens and input_lens appear only when every point carries them."""
    points = [MixingPoint(0.01, 1, 0.011), MixingPoint(0.1, 2, 0.102, prefill_len=4096)]
    fit = fit_mixing(points)
    assert set(fit.domain) == {"chunks", "work_s_min", "work_s_max"}
    assert MixingFit.from_dict(fit.to_dict()) == fit


def test_losses_below_the_floor_are_weighted_by_it() -> None:
    """A loss below a tenth of the largest (noise, zero or negative) is fitted with weight
    1/floor and its relative error divides by the floor; the document reads back."""
    points = [
        MixingPoint(0.01, 1, -0.0004),
        MixingPoint(0.05, 1, 0.05),
        MixingPoint(0.2, 2, 0.2),
        MixingPoint(0.1, 1, 0.0),
    ]
    fit = fit_mixing(points)
    floor = mixing_floor_s([p.loss_s for p in points])
    assert floor == pytest.approx(MIXING_RELATIVE_FLOOR * 0.2)
    for point, residual in zip(points, fit.residuals, strict=True):
        divisor = max(point.loss_s, floor)
        assert residual.rel_error == pytest.approx(abs(residual.predicted - point.loss_s) / divisor)
        assert residual.observed == point.loss_s
    assert load_fit(fit.to_dict()) == fit
    assert mixing_floor_s([0.002, -0.001]) == MIXING_FLOOR_S  # never below 1 ms


# A mixing fit measured on vLLM's CPU server beside other work: the short prefill's two points
# lost 14 ms and -9 ms (noise), the long one's 115 ms and 109 ms, against 10 ms and 109 ms of
# on-device work. Weighted by 1/max(y, 1 ms) the point below zero weighed 1,000 and the fit came
# out at share 0, step 0 (302 % mean error).
_NOISY_VLLM = [
    MixingPoint(0.010, 1, 0.014),
    MixingPoint(0.109, 1, 0.115),
    MixingPoint(0.010, 1, -0.009),
    MixingPoint(0.109, 1, 0.109),
]


def test_a_point_below_zero_does_not_pull_the_fit_to_no_cost() -> None:
    """The fit of the noisy points keeps a real share (the long prefill's loss is its work): the
    point below zero weighs as much as the smallest real loss, not a thousand times the largest.
    Its mean error (66 %) still tells how noisy the points were."""
    fit = fit_mixing(_NOISY_VLLM)
    assert 0.5 < fit.coefficients["share"] < 1.1
    assert fit.predict(0.109, 1) == pytest.approx(0.112, rel=0.5)
    assert 0.5 < fit.mean_rel_error < 1.0
    assert MixingFit.from_dict(fit.to_dict()) == fit


def _first_version(points: Sequence[MixingPoint]) -> dict[str, object]:
    """A document as fit_version 1 wrote it: fitted and scored with the 1 ms floor alone."""
    import numpy as np

    from narwhal_fit._residuals import solve_relative, summarize

    design = np.array([[p.work_s, p.chunks] for p in points], dtype=np.float64)
    y = np.array([p.loss_s for p in points], dtype=np.float64)
    xs = [(p.chunks, p.work_s) for p in points]
    coefficients, residuals = solve_relative(
        design, y, ("share", "step_s"), xs, floor=MIXING_FLOOR_S
    )
    mean, worst, worst_point = summarize(residuals)
    fit = MixingFit(
        coefficients=coefficients,
        domain={"chunks": [1], "work_s_min": 0.010, "work_s_max": 0.109},
        residuals=residuals,
        mean_rel_error=mean,
        worst_rel_error=worst,
        worst_point=worst_point,
    )
    doc = fit.to_dict()
    doc["fit_version"] = 1
    doc["weights"] = "1/max(y,0.001)"
    return doc


def test_a_first_version_document_reads_as_it_was_written() -> None:
    """Stores written before the relative floor keep their fits: fit_version 1 is read with the
    1 ms floor (here the fit at no cost that floor made), version 2 with the relative one, and a
    version-1 document claiming the new weights is refused."""
    doc = _first_version(_NOISY_VLLM)
    fit = MixingFit.from_dict(doc)
    assert fit.coefficients == {"share": 0.0, "step_s": 0.0}
    assert fit.mean_rel_error == pytest.approx(3.0)  # the 302 % of the run, near enough
    assert fit.to_dict()["fit_version"] == 2
    with pytest.raises(FitError, match="weights"):
        MixingFit.from_dict({**doc, "weights": MIXING_WEIGHTS})
    with pytest.raises(FitError, match="rel_error"):
        MixingFit.from_dict({**doc, "fit_version": 2, "weights": MIXING_WEIGHTS})


def test_fit_needs_two_distinct_points() -> None:
    """Repeats of one (work_s, chunks) are not enough, and the message says why."""
    with pytest.raises(InsufficientDataError, match="two or more distinct"):
        fit_mixing([MixingPoint(0.01, 1, 0.011), MixingPoint(0.01, 1, 0.012)])
    with pytest.raises(InsufficientDataError, match="got 0 point"):
        fit_mixing([])


@pytest.mark.parametrize(
    ("point", "message"),
    [
        (MixingPoint(-0.01, 1, 0.01), r"point\[0\].work_s must be finite and >= 0"),
        (MixingPoint(math.nan, 1, 0.01), r"point\[0\].work_s"),
        (MixingPoint(0.01, 0, 0.01), r"point\[0\].chunks must be a positive integer"),
        (MixingPoint(0.01, 1, math.inf), r"point\[0\].loss_s must be finite"),
        (MixingPoint(0.01, 1, 0.01, prefill_len=0), r"point\[0\].prefill_len"),
    ],
)
def test_fit_refuses_unusable_values(point: MixingPoint, message: str) -> None:
    """Every unusable value is named."""
    with pytest.raises(InsufficientDataError, match=message):
        fit_mixing([point, MixingPoint(0.1, 2, 0.1)])


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("weights", "1/y", "weights"),
        ("form", "ttft-quadratic-v1", "form"),
        ("mean_rel_error", 0.5, "mean_rel_error"),
    ],
)
def test_from_dict_refuses_a_tampered_document(key: str, value: object, message: str) -> None:
    """A document whose header or summary disagrees with the form is refused, naming the key."""
    doc = fit_mixing(_exact(0.9, 0.001)).to_dict()
    doc[key] = value
    with pytest.raises(FitError, match=message):
        MixingFit.from_dict(doc)


def test_from_dict_refuses_predictions_off_the_coefficients() -> None:
    """A residual whose prediction does not follow the coefficients is refused."""
    doc = fit_mixing(_exact(0.9, 0.001)).to_dict()
    doc["coefficients"]["share"] = 0.5
    with pytest.raises(FitError, match="predicted"):
        MixingFit.from_dict(doc)


def test_chunks_and_work() -> None:
    """Chunks round up (None: one step); the work is the prefill fit without its intercept."""
    assert [prefill_chunks(n, 8192) for n in (1, 8192, 8193, 16384)] == [1, 1, 2, 2]
    assert prefill_chunks(100_000, None) == 1
    assert prefill_work_s({"a": 9.0, "b": 2.0, "c": 3.0}, 10) == pytest.approx(320.0)
