"""``compare`` on runs of the simulator: a 15 % slower decode is told apart at 200 requests, two
runs of one fleet are not (docs/design.md §17).

The runs are made on the simulator's own scheduler on a virtual clock (``VirtualGpu``, the code
its HTTP engines run), so 21 runs of 200 requests take seconds and a busy machine cannot bend
them: one engine of the default preset (Llama-3.1-8B on an H200, its 1 % step jitter seeded per
run) offered the runbook's 8,192-in / 128-out requests at 1 request/s on a Poisson schedule,
the one ``prepare --arrivals poisson --rate 1 --requests 200 --seed 1729`` draws. Every run
offers that same schedule, as two runs of one workload file do, so two runs of one fleet differ
by the device's jitter alone; the Poisson gaps spread the batches a request decodes in, and so
its TPOT, as a live trial's do. B's slower decode is the preset's decode coefficients (d0, d1,
d2) times 1.15. Each run is written as a real run folder (good per request by the runbook's SLO)
and compared by ``compare_sides`` and once by the command.

One real-time check closes the file: two ``run``s of 20 requests against the simulated fleet,
compared by the command.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from narwhal_sim.model._presets import Preset, get_preset
from narwhal_sim.model._virtual import TokenStamps, VirtualGpu, run_on_virtual_clock
from narwhal_sim.testing import SimFleet
from narwhal_trial import RequestRecord
from narwhal_trial.compare._compare import CompareRequest, compare_sides
from narwhal_trial.documents._comparison import ShiftVerdict
from narwhal_trial.workload._arrivals import arrival_offsets_s

from ..report._kit import write_run_folder
from .conftest import REPO, Cli, run_args

IN, OUT, N, RATE = 8192, 128, 200, 1.0
TTFT_S, TPOT_S = 2.0, 0.0333
"""The runbook's shape, its 200 requests and its SLO (the run folders' manifests say the same)."""
FLEET = get_preset()
SLOWER = FLEET.with_overrides(d0=FLEET.d0 * 1.15, d1=FLEET.d1 * 1.15, d2=FLEET.d2 * 1.15)
SCHEDULE = arrival_offsets_s(N, RATE, "poisson", seed=1729).tolist()


def _trial(preset: Preset, seed: int) -> list[TokenStamps]:
    """The schedule offered to one engine of ``preset`` on a device seeded ``seed``."""

    async def main() -> list[TokenStamps]:
        gpu = VirtualGpu(seed=seed)
        engine = gpu.engine(preset)
        loop = asyncio.get_running_loop()
        start, stamps = loop.time(), []
        for due in SCHEDULE:
            await asyncio.sleep(max(0.0, start + due - loop.time()))
            stamps.append(gpu.submit(engine, IN, OUT))
        await asyncio.gather(*(s.done for s in stamps))
        await gpu.stop()
        return stamps

    return run_on_virtual_clock(main())


def _run(out: Path, preset: Preset, seed: int) -> Path:
    """A run folder of the trial on the simulator: each request's TTFT and TPOT as the device
    stamped its tokens, good when both are within the SLO."""
    out.mkdir(parents=True)
    records = []
    for n, (due, s) in enumerate(zip(SCHEDULE, _trial(preset, seed), strict=True)):
        assert len(s.tokens) == OUT
        ttft, tpot = s.ttft, (s.tokens[-1] - s.tokens[0]) / (OUT - 1)
        sent = due + 0.0004
        end = sent + ttft + tpot * (OUT - 1)
        records.append(
            RequestRecord.model_validate({
                "sequence": n, "request_id": f"{out.name}-{n:06d}", "due_s": due, "sent": True,
                "sent_s": sent, "lag_s": 0.0004, "end_s": end, "in_flight": 1,
                "status": "completed", "miss_reason": None, "http_status": 200, "error": None,
                "ttft_s": ttft, "tpot_s": tpot, "e2e_s": end - sent, "prompt_tokens": IN,
                "completion_tokens": OUT, "chunks": OUT, "finish_reason": "length",
                "bytes_sent": 40000, "bytes_received": 60000,
                "good": ttft <= TTFT_S and tpot <= TPOT_S,
            })
        )  # fmt: skip
    return write_run_folder(
        out, records, run_id=out.name, rate=RATE, input_tokens=IN, output_tokens=OUT
    )


def _shift(latency: list[ShiftVerdict], measure: str, quantile: int) -> ShiftVerdict:
    return next(s for s in latency if s.measure == measure and s.quantile == quantile)


@pytest.fixture(scope="module")
def slower_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A run of the fleet (seed 1) and one of the fleet with a 15 % slower decode (seed 2), as
    ``runs/before/rate-1`` and ``runs/after/rate-1`` (the READMEs' example)."""
    runs = tmp_path_factory.mktemp("slower") / "runs"
    return _run(runs / "before" / "rate-1", FLEET, 1), _run(runs / "after" / "rate-1", SLOWER, 2)


def test_a_fifteen_percent_slower_decode_is_told_apart(slower_pair: tuple[Path, Path]) -> None:
    """TPOT p50 is worse by about the factor (the steps that also prefill another request's
    prompt, not slowed, pull it a little below 1.15); nothing is better; the command exits 2."""
    doc = compare_sides(CompareRequest(*slower_pair))
    (pair,) = doc.pairs
    tpot50 = _shift(pair.latency, "tpot", 50)
    assert tpot50.verdict == "worse" and tpot50.low_s > 0
    assert 1.10 < tpot50.b_s / tpot50.a_s < 1.20, tpot50
    assert _shift(pair.latency, "tpot", 99).difference_s > 0
    assert "better" not in {s.verdict for s in pair.latency}
    # every request of both runs met the SLO: attainment cannot tell them apart
    assert pair.attainment.good_a == pair.attainment.good_b == N
    assert pair.attainment.verdict == "no detectable difference"
    assert doc.exit_code == 2 and "TPOT p50 at 1 request/s" in doc.worse
    back = compare_sides(CompareRequest(slower_pair[1], slower_pair[0]))
    assert _shift(back.pairs[0].latency, "tpot", 50).verdict == "better"
    assert back.exit_code == 0 and back.worse == []


def test_the_command_says_tpot_got_worse(
    slower_pair: tuple[Path, Path], cli: Cli, tmp_path: Path
) -> None:
    """Through ``load_trial.py compare``: exit 2, the TPOT p50 line says worse, the document is
    written with the same verdict; the text is the READMEs' example, word for word."""
    out = tmp_path / "comparison.json"
    done = cli("compare", *map(str, slower_pair), "--out", str(out))
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = [x for x in done.stdout.splitlines() if x.strip().startswith("TPOT p50 ")]
    assert line.endswith(" ms)") and " worse (these samples detect " in line, line
    assert "verdict at 95%: worse: TPOT p50 at 1 request/s" in done.stdout
    doc = json.loads(out.read_text())
    assert doc["exit_code"] == 2 and doc["worse"] == ["TPOT p50 at 1 request/s"]
    example = done.stdout.replace(f"{slower_pair[0].parents[2]}/", "")
    assert example.startswith("A: run runs/before/rate-1 (1 run at 1 request/s)\n"), example
    for readme in (REPO / "README.md", REPO / "packages" / "narwhal-trial" / "README.md"):
        assert f"```\n{example}```\n" in readme.read_text(), readme


def test_two_runs_of_one_fleet_tell_no_difference(tmp_path: Path) -> None:
    """Ten pairs of runs of the same fleet, each run on its own device seed: at least nine say no
    detectable difference in every measure (attainment, TTFT and TPOT p50 and p99)."""
    same = 0
    for k in range(10):
        a = _run(tmp_path / f"a{k}", FLEET, 100 + 2 * k)
        b = _run(tmp_path / f"b{k}", FLEET, 101 + 2 * k)
        doc = compare_sides(CompareRequest(a, b, seed=k))
        verdicts = {doc.pairs[0].attainment.verdict} | {s.verdict for s in doc.pairs[0].latency}
        same += verdicts == {"no detectable difference"} and doc.exit_code == 0
    assert same >= 9, f"{same}/10"


@pytest.mark.slow
def test_two_real_time_runs_compare_through_the_command(
    cli: Cli, shared_fleet: SimFleet, tiny_workload: Path, tmp_path: Path
) -> None:
    """Two ``run``s of 20 requests against the simulated fleet, in real time, then ``compare``:
    a verdict (exit 0 or 2, never a refusal), its document written."""
    base = str(shared_fleet.router_url)
    for name in ("a", "b"):
        proc = cli(*run_args(base, tiny_workload, tmp_path / name, requests=20, rate=10,
                       attainment=0.75))  # fmt: skip
        assert proc.returncode in (0, 2), proc.stdout + proc.stderr
    out = tmp_path / "comparison.json"
    done = cli("compare", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(out))
    assert done.returncode in (0, 2), done.stdout + done.stderr
    assert done.stdout.strip().splitlines()[-1].startswith("verdict at 95%: ")
    doc = json.loads(out.read_text())
    assert doc["exit_code"] == done.returncode
    (pair,) = doc["pairs"]
    assert pair["attainment"]["requests_a"] == pair["attainment"]["requests_b"] == 20
