"""``--mixing`` end to end on a simulated engine: the points, the fit, format_version 2, refit.

The simulator runs a prefill chunk in the same step as the running decodes (vLLM's chunked
prefill), so each decode step that carries a chunk grows by the chunk's whole cost: the streams
lose ``1·(b·L + c·L²)`` plus a small fixed cost per chunk, and the fitted share is near 1. Times
are the simulator's own (time scale 4, the suite's), so the test asserts what load cannot break:
a share within 0.7-1.3, a non-negative step.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

import narwhal_fit
from narwhal_fit import PrefillFit, load_fit, prefill_chunks, prefill_work_s
from narwhal_profile_cli import cli
from narwhal_sim.testing import SimFleet
from narwhal_store import read_store

if TYPE_CHECKING:
    from .conftest import Kit

pytestmark = pytest.mark.slow

ONE_ENGINE: list[dict[str, Any]] = [{"iid": "e0", "role": "mixed"}]


def _doubling_fit(real: Any) -> Any:
    def fit(lengths: Sequence[int], ttft_s: Sequence[float]) -> PrefillFit:
        return real(lengths, [2.0 * t for t in ttft_s])

    return fit


def test_mixing_sweep_fits_a_share_near_one_and_refits(
    kit: Kit,
    sim_factory: Callable[..., SimFleet],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """--mixing records one point per decode input length x mixing length (the smallest and the
    largest prefill length by default), fits them, prints the fit, and writes format_version 2;
    a refit whose TTFT fit doubles doubles each point's work and halves the share."""
    fleet = sim_factory(ONE_ENGINE)
    done = kit.run("--fleet", fleet.fleet_path, *kit.small_sweep, "--mixing")
    assert done.returncode == 0, done.stderr
    store_path, sidecar_path = kit.outputs(fleet)
    (line, scheduler, _) = done.stdout.splitlines()  # fits, scheduler settings, the store
    assert line.startswith("e0: prefill fit mean ") and "; mixing fit share " in line, line
    assert scheduler.startswith("e0: scheduler: budget "), scheduler
    loaded = read_store(store_path)  # verifies the pair
    assert loaded.store.format_version == loaded.sidecar.format_version == 2
    (profile,) = loaded.store.profiles
    (entry,) = loaded.sidecar.profiles
    prefill = profile.prefill_fit.coefficients
    medians = {s.length: statistics.median(s.ttft_s) for s in entry.prefill_samples}
    samples = entry.mixing_samples
    assert [(s.input_len, s.prefill_len) for s in samples] == [
        (512, 2048),
        (512, 16384),
        (2048, 2048),
        (2048, 16384),
    ]
    for sample in samples:
        assert sample.concurrency == 4 and sample.repeat == 0
        assert sample.interval_s == pytest.approx(3 * medians[sample.prefill_len])
        assert sample.work_s == pytest.approx(prefill_work_s(prefill, sample.prefill_len))
        assert sample.chunks == prefill_chunks(sample.prefill_len, 8192)
        assert sample.valid == (sample.reason is None), sample.reason
        if sample.valid:
            assert len(sample.streams) == 4 and len(sample.prefills) == 4
            for injected in sample.prefills:
                assert injected.first_ns is not None and injected.first_ns > injected.send_ns
            assert sample.loss_s is not None and sample.loss_s > 0
    valid = [s for s in samples if s.valid]
    assert {s.prefill_len for s in valid} == {2048, 16384}, [s.reason for s in samples]
    assert profile.mixing_fit is not None
    fit = load_fit(profile.mixing_fit.to_dict())
    share, step_s = fit.coefficients["share"], fit.coefficients["step_s"]
    assert 0.7 <= share <= 1.3, fit.coefficients
    assert step_s >= 0.0
    assert len(fit.residuals) == len(valid)

    # refit with today's fit: same figures, points kept, still format_version 2
    out = tmp_path / "refit.json"
    args = ["--fleet", str(fleet.fleet_path), "--refit-samples", str(sidecar_path)]
    assert cli.run([*args, "--out", str(out)]) == 0, capsys.readouterr().err
    again = read_store(out)
    assert again.store.format_version == again.sidecar.format_version == 2
    assert again.store.profiles[0].mixing_fit == profile.mixing_fit
    assert again.sidecar.profiles[0].mixing_samples == samples
    capsys.readouterr()

    # a TTFT fit twice as slow: each point's work doubles, the share halves, the step stays
    monkeypatch.setattr(narwhal_fit, "fit_prefill", _doubling_fit(narwhal_fit.fit_prefill))
    doubled = tmp_path / "doubled.json"
    assert cli.run([*args, "--out", str(doubled)]) == 0, capsys.readouterr().err
    refitted = read_store(doubled)
    new_samples = refitted.sidecar.profiles[0].mixing_samples
    for old, new in zip(samples, new_samples, strict=True):
        assert new.work_s == pytest.approx(2 * (old.work_s or 0.0), rel=1e-6)
        assert new.model_copy(update={"work_s": old.work_s}) == old
    new_fit = refitted.store.profiles[0].mixing_fit
    assert new_fit is not None
    assert new_fit.coefficients["share"] == pytest.approx(share / 2, rel=1e-5)
    assert new_fit.coefficients["step_s"] == pytest.approx(step_s, rel=1e-5, abs=1e-9)
    assert "; mixing fit share " in capsys.readouterr().out


def test_without_mixing_the_documents_stay_version_1(
    kit: Kit, sim_factory: Callable[..., SimFleet]
) -> None:
    """Without --mixing: format_version 1, no mixing points, no mixing fit, no mixing text."""
    fleet = sim_factory(ONE_ENGINE)
    done = kit.run("--fleet", fleet.fleet_path, *kit.small_sweep)
    assert done.returncode == 0, done.stderr
    assert "mixing fit" not in done.stdout and "mixing" not in done.stderr
    store_path, sidecar_path = kit.outputs(fleet)
    loaded = read_store(store_path)
    assert loaded.store.format_version == loaded.sidecar.format_version == 1
    assert loaded.store.profiles[0].mixing_fit is None
    assert loaded.sidecar.profiles[0].mixing_samples == []
    assert kit.load(store_path)["format_version"] == kit.load(sidecar_path)["format_version"] == 1


@pytest.mark.parametrize(
    ("value", "needle"),
    [("0", "--mixing-lens: item '0' of '0' is not positive"), ("abc", "is not an integer")],
)
def test_bad_mixing_lens_exits_2_and_writes_nothing(
    kit: Kit, tmp_path: Path, value: str, needle: str
) -> None:
    """The real command refuses a bad --mixing-lens before contacting any engine."""
    fleet = tmp_path / "fleet.json"
    fleet.write_text(
        '{"format": "narwhal.fleet", "format_version": 1, "profiles": {"path": "p/s.json"},'
        ' "engines": [{"iid": "e0", "url": "http://127.0.0.1:9", "role": "mixed"}]}'
    )
    done = kit.run("--fleet", fleet, "--mixing", "--mixing-lens", value)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.startswith("narwhal-profile: error: ") and needle in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fleet.json"]
