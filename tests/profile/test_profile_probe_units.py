"""Units of the freshness probe (``--verify``): the points it takes from a profile's sweep, the
profile's timing at each, and each phase's drift with its interval."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from narwhal_fit import DecodePoint
from narwhal_profile_cli._errors import ProfileAbortError, ProfileUsageError
from narwhal_profile_cli.results._probe import (
    check_references,
    decode_reference,
    drift_factor,
    engine_drift,
    prefill_reference,
    probe_plan,
)
from narwhal_profile_cli.results._result import CommandResult, emit
from narwhal_profile_cli.sweeps._decode import Cohort
from narwhal_profile_cli.sweeps._prefill import PrefillTimings
from narwhal_store import ProbeDocument, Profile, ProfileSamples, SweepSettings

SHA = "0" * 64
KEY = {"engine": "e0", "gpu_group": None, "role_split": {"mixed": 1}, "target_role": "mixed"}
PREFILL = {"a": 0.01, "b": 1e-5, "c": 0.0}
DECODE = {"d0": 0.005, "d1": 0.001, "d2": 0.0}


def _settings(**given: Any) -> SweepSettings:
    values: dict[str, Any] = {
        "prefill_lens": [256, 512, 1024, 2048, 4096, 8192, 12288, 16384],
        "decode_input_lens": [512, 4096, 8192],
        "decode_concurrency": [1, 4, 16, 48],
        "decode_tokens": 64,
        "prefill_repeats": 3,
        "decode_repeats": 1,
        "limits_applied": None,
        "prompt_seed": 7,
    }
    return SweepSettings.model_validate(values | given)


def _profile(decode_fit: bool = True) -> Profile:
    fit = {"form": "tpot-batch-context-v1", "coefficients": DECODE, "domain": {}}
    return Profile.model_validate(
        {
            "key": KEY,
            "binding": {"kind": "identity", "generation": SHA, "sha256": SHA},
            "engine": {
                "url": "http://127.0.0.1:9",
                "model": "m",
                "root": None,
                "max_model_len": 32768,
                "version": "0.11.0",
            },
            "prefill_fit": {"form": "ttft-quadratic-v1", "coefficients": PREFILL, "domain": {}},
            "decode_fit": fit if decode_fit else None,
            "colocation": None,
            "samples_sha256": SHA,
        }
    )


def _samples(
    prefill: dict[int, list[float]], decode: list[tuple[int, int, float, bool]]
) -> ProfileSamples:
    return ProfileSamples.model_validate(
        {
            "key": KEY,
            "evidence": {"before": {}, "after": {}},
            "settings": _settings(
                prefill_lens=sorted(prefill) or [256, 1024, 4096],
                decode_input_lens=[512, 2048],
                decode_concurrency=[1, 4],
            ).model_dump(),
            "prefill_samples": [
                {"length": n, "ttft_s": t, "request_ids": [f"r{i}" for i in range(len(t))]}
                for n, t in prefill.items()
            ],
            "decode_samples": [
                {
                    "input_len": n_in,
                    "concurrency": n,
                    "repeat": 0,
                    "valid": valid,
                    "reason": None if valid else "waiting requests",
                    "streams": [],
                    "tpot_s": tpot,
                    "ctx": n_in + 32.0,
                }
                for n_in, n, tpot, valid in decode
            ],
            "neighbours": [],
            "decode_fit": None,
        }
    )


def test_the_default_sweep_is_probed_at_its_ends_and_middles() -> None:
    """8 prefill lengths: the shortest, the lower middle and the longest; decode at 4,096 (the
    input length nearest the middle of 512..8,192) at 1 and 4 streams (4 is nearest the
    geometric middle of 1..48, 6.9, in log terms)."""
    plan = probe_plan("e0", _settings())
    assert plan.prefill_lens == (256, 2048, 16384)
    assert (plan.decode_input_len, plan.concurrencies, plan.decode_tokens) == (4096, (1, 4), 64)


def test_ties_pick_the_shorter_input_and_a_second_cohort() -> None:
    """512 and 2,048 are as near 1,280: the shorter; 1 and 4 are as near 2 in log terms: the
    mid cohort is 4 (1 is probed anyway); a sweep without 1 still probes one stream."""
    plan = probe_plan("e0", _settings(decode_input_lens=[512, 2048], decode_concurrency=[1, 4]))
    assert (plan.decode_input_len, plan.concurrencies) == (512, (1, 4))
    plan = probe_plan("e0", _settings(decode_concurrency=[4, 16, 64]))
    assert plan.concurrencies == (1, 16)


def test_a_profile_without_decode_points_is_refused() -> None:
    """No decode input length in the sweep: a usage error naming the engine."""
    with pytest.raises(ProfileUsageError, match="engine e0: its profile's sweep has no decode"):
        probe_plan("e0", _settings(decode_input_lens=[]))


def test_references_are_the_samples_median_else_the_fit() -> None:
    """The median of the raw TTFTs and of the valid cohorts' TPOTs; without any there, the fit
    (the decode fit at the probe's context)."""
    samples = _samples({256: [0.03, 0.01, 0.02]}, [(512, 1, 0.006, True), (512, 4, 0.5, False)])
    profile = _profile()
    median = prefill_reference(profile, samples, 256)
    assert median is not None and (median.seconds, median.kind) == (0.02, "samples")
    fitted = prefill_reference(profile, samples, 1000)
    assert fitted is not None and fitted.kind == "fit"
    assert fitted.seconds == pytest.approx(0.01 + 1e-5 * 1000)
    one = decode_reference(profile, samples, 512, 1, 600.0)
    assert one is not None and (one.seconds, one.kind) == (0.006, "samples")
    four = decode_reference(profile, samples, 512, 4, 600.0)  # its only cohort is invalid
    assert four is not None and four.kind == "fit"
    assert four.seconds == pytest.approx(0.005 + 0.004)
    assert decode_reference(_profile(decode_fit=False), samples, 512, 4, 600.0) is None


def test_a_point_without_any_reference_is_refused_up_front() -> None:
    """No decode fit and no valid cohort at a probed point: a usage error naming the point and
    the store, before anything is measured."""
    samples = _samples({256: [0.01], 1024: [0.02], 4096: [0.05]}, [(512, 1, 0.006, True)])
    plan = probe_plan("e0", samples.settings)
    with pytest.raises(ProfileUsageError) as caught:
        check_references("e0", _profile(decode_fit=False), samples, plan, "store.json")
    assert caught.value.message == (
        "engine e0: its profile in store.json holds neither samples nor a fit for decode at "
        "input 512 x 4"
    )


def test_drift_is_the_median_factor_with_a_seeded_interval() -> None:
    """The same factors give the same interval; it holds the median; past the threshold only
    when |factor - 1| exceeds it."""
    factors = [1.18, 1.22, 1.2, 1.25, 1.19, 1.21]
    first, again = drift_factor(factors, 0.1), drift_factor(factors, 0.1)
    assert first == again
    assert first.factor == pytest.approx(1.205) and first.repeats == 6 and first.drifted
    assert 1.18 <= first.low <= first.factor <= first.high <= 1.25
    assert not drift_factor([0.95, 1.05, 1.0], 0.1).drifted
    assert drift_factor([0.89], 0.1).drifted
    single = drift_factor([1.0], 0.1)
    assert (single.low, single.factor, single.high) == (1.0, 1.0, 1.0)


def _cohort(n: int, tpot: float | None) -> Cohort:
    point = None if tpot is None else DecodePoint(concurrency=n, ctx=544.0, tpot_s=tpot)
    reason = None if tpot is not None else "the engine's metrics show waiting requests"
    return Cohort(512, n, 0, [], point, reason)


def test_engine_drift_leaves_invalid_cohorts_out_and_needs_one_valid() -> None:
    """Factors per point; an invalid cohort is left out; none valid aborts naming why."""
    samples = _samples(
        {256: [0.01], 1024: [0.02], 4096: [0.05]}, [(512, 1, 0.006, True), (512, 4, 0.01, True)]
    )
    prefill = [PrefillTimings(256, [0.012, 0.012, 0.012], ["a", "b", "c"])]
    cohorts = [_cohort(1, 0.0072), _cohort(4, None), _cohort(4, 0.012)]
    drift = engine_drift(
        "e0",
        _profile(),
        samples,
        created_at="2026-01-01T00:00:00+00:00",
        prefill=prefill,
        cohorts=cohorts,
        threshold=0.1,
        seconds=3.0,
    )
    assert [(p.phase, p.concurrency, p.factors) for p in drift.points] == [
        ("prefill", 1, pytest.approx([1.2, 1.2, 1.2])),
        ("decode", 1, pytest.approx([1.2])),
        ("decode", 4, pytest.approx([1.2])),
    ]
    assert drift.prefill is not None and drift.decode is not None
    assert drift.decode.repeats == 2 and drift.drifted
    with pytest.raises(ProfileAbortError, match="engine e0: no decode cohort of the probe"):
        engine_drift(
            "e0",
            _profile(),
            samples,
            created_at="2026-01-01T00:00:00+00:00",
            prefill=prefill,
            cohorts=[_cohort(1, None)],
            threshold=0.1,
            seconds=3.0,
        )


def test_a_drifted_probe_exits_3_with_a_line_per_engine() -> None:
    """The result of a probe that found e0 drifted: exit 3, stdout one line per engine and where
    the document went, stderr one line naming e0, the phase and its factor."""
    samples = _samples({256: [0.01], 1024: [0.02], 4096: [0.05]}, [(512, 1, 0.006, True)])
    drift = engine_drift(
        "e0",
        _profile(),
        samples,
        created_at="2026-01-01T00:00:00+00:00",
        prefill=[PrefillTimings(256, [0.0101, 0.0099, 0.01], ["a", "b", "c"])],
        cohorts=[_cohort(1, 0.0072)] * 3,
        threshold=0.1,
        seconds=4.25,
    )
    doc = ProbeDocument(
        format="narwhal.probe",
        format_version=1,
        generator={"name": "narwhal-profile", "version": "0"},  # type: ignore[arg-type]
        created_at="2026-01-02T00:00:00+00:00",
        fleet="fleet.json",
        fleet_sha256=SHA,
        profiles="store.json",
        profiles_sha256=SHA,
        threshold=0.1,
        engines={"e0": drift},
    )
    result = CommandResult(mode="verify", path=Path("probe.json"), profiles=1, probe=doc)
    out, err = io.StringIO(), io.StringIO()
    assert emit(result, "text", stdout=out, stderr=err) == 3
    assert out.getvalue().splitlines() == [
        "e0: prefill 1.00x (0.99-1.01), decode 1.20x (1.20-1.20) against the profile of "
        "2026-01-01T00:00:00+00:00; 4.2 s",
        "wrote the probe of 1 engine(s) to probe.json",
    ]
    assert err.getvalue() == (
        "narwhal-profile: drifted: engine e0: decode 1.20x the profile (5-95 % 1.20-1.20), past "
        "the 10 % threshold\n"
    )
