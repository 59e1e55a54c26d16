"""End-to-end scheduled workloads: ``prepare --trace`` / ``--arrivals`` and ``run --speedup``
against the simulated router, and every refusal (one line, exit 1, nothing written)."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from narwhal_sim.testing import SimFleet
from narwhal_trial import Summary
from narwhal_trial.workload._file import load_workload, prompt_ids, request_body

from ._store_kit import write_profiles
from .conftest import Cli, prepare_workload, read_run, run_args

pytestmark = pytest.mark.slow

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "traces"
# speedups that replay each sample in about 3 s
SAMPLES = [("mooncake.jsonl", 8.0), ("azure.csv", 10.0), ("burstgpt.csv", 150.0)]


def _prepare(cli: Cli, fleet: SimFleet, out: Path, *args: str) -> dict[str, Any]:
    proc = cli("prepare", "--base", str(fleet.router_url), "--seed", "7", "--out", str(out), *args)
    assert proc.returncode == 0, proc.stderr
    doc: dict[str, Any] = orjson.loads((out / "workload.json").read_bytes())
    return doc


def _replay(
    cli: Cli, fleet: SimFleet, workload: Path, out: Path, speedup: float, **flags: Any
) -> Any:
    args = run_args(str(fleet.router_url), workload, out, speedup=speedup, **flags)
    # run_args adds the runbook's --rate/--requests: a scheduled workload refuses them
    for flag in ("--rate", "--requests"):
        i = args.index(flag)
        del args[i : i + 2]
    return cli(*args)


@pytest.mark.parametrize(("name", "speedup"), SAMPLES)
def test_each_sample_trace_replays_on_its_own_schedule(
    cli: Cli, shared_fleet: SimFleet, tmp_path: Path, name: str, speedup: float
) -> None:
    """Each format's sample: every request is due at its trace offset / speedup, carries its own
    lengths exactly, and the summary's schedule view accounts for every request."""
    doc = _prepare(cli, shared_fleet, tmp_path / "w", "--trace", str(EXAMPLES / name))
    sched = doc["schedule"]
    assert doc["sampler"] == "pool-blocks-v1"
    assert sched["source"]["path"] == str(EXAMPLES / name)
    n = len(sched["due_offsets_ns"])
    assert n >= 10 and sched["due_offsets_ns"][0] == 0
    # predict first, from a store over the samples' lengths (the tiny preset's fits)
    fleet = tmp_path / "fleet.json"
    fleet.write_bytes(shared_fleet.fleet_path.read_bytes())
    store = write_profiles(fleet, [16, 1024, 16384], [16, 1024, 16384], concurrency=[1, 4, 16])
    workload = tmp_path / "w" / "workload.json"
    pred = cli("predict", "--fleet", str(fleet), "--profiles", str(store), "--workload",
               str(workload), "--speedup", str(speedup), "--ttft", "2", "--tpot", "0.0333",
               "--attainment", "0.5", "--json")  # fmt: skip
    assert pred.returncode == 0, pred.stdout + pred.stderr
    doc_p = orjson.loads(pred.stdout)
    assert (
        doc_p["inputs"]["workload"]["sha256"] == hashlib.sha256(workload.read_bytes()).hexdigest()
    )
    assert doc_p["prediction"]["speedup"] == speedup
    assert sum(b["requests"] for b in doc_p["prediction"]["buckets"]) == n
    out = tmp_path / "run"
    proc = _replay(cli, shared_fleet, tmp_path / "w" / "workload.json", out, speedup,
                   attainment=0.5)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"speedup {speedup:g}x" in proc.stdout and "densest second" in proc.stdout
    manifest, records, summary = read_run(out)
    Summary.model_validate(summary)
    assert manifest["arguments"]["speedup"] == speedup
    assert manifest["requests"] == summary["requests"] == len(records) == n
    for r in records:
        k = r["sequence"]
        assert r["due_s"] == pytest.approx(sched["due_offsets_ns"][k] / 1e9 / speedup, abs=1e-9)
        assert r["status"] == "completed", r
        assert r["prompt_tokens"] == sched["input_tokens"][k]
        assert r["completion_tokens"] == sched["output_tokens"][k]
    view = summary["schedule"]
    assert view["speedup"] == speedup and view["source"] == "trace"
    assert sum(b["requests"] for b in view["buckets"]) == n
    assert sum(b["good"] for b in view["buckets"]) == summary["good"]
    assert sum(view["offered"]["requests"]) == n
    assert sum(view["offered"]["input_tokens"]) == sum(sched["input_tokens"])
    assert sum(view["input_lengths"]["counts"]) == n
    assert view["span_s"] == pytest.approx(sched["due_offsets_ns"][-1] / 1e9 / speedup)


def test_requests_due_together_are_sent_together(
    cli: Cli, shared_fleet: SimFleet, tmp_path: Path
) -> None:
    """Mooncake's first two rows share timestamp 0 (and rows 3-4 share 3052 ms): both are due at
    the same instant, both sent within the lag limit, and the densest second counts them."""
    _prepare(cli, shared_fleet, tmp_path / "w", "--trace", str(EXAMPLES / "mooncake.jsonl"))
    out = tmp_path / "run"
    proc = _replay(cli, shared_fleet, tmp_path / "w" / "workload.json", out, 8.0, attainment=0.5)
    assert proc.returncode == 0, proc.stderr
    _, records, summary = read_run(out)
    by = {r["sequence"]: r for r in records}
    assert by[0]["due_s"] == by[1]["due_s"] and by[2]["due_s"] == by[3]["due_s"]
    assert all(by[k]["sent"] and 0 <= by[k]["lag_s"] < 0.251 for k in (0, 1, 2, 3))
    assert summary["schedule"]["densest_second"]["requests"] >= 2
    assert summary["schedule"]["densest_second"]["misses"] == 0


def test_equal_hash_ids_give_identical_token_blocks(
    cli: Cli, shared_fleet: SimFleet, tmp_path: Path
) -> None:
    """Mooncake rows 1 and 2 share blocks 0-7 and then differ: their prompts are identical for
    8 x 512 tokens and differ in the ninth block; the workload says the reuse holds."""
    doc = _prepare(cli, shared_fleet, tmp_path / "w", "--trace", str(EXAMPLES / "mooncake.jsonl"))
    reuse = doc["schedule"]["prefix_reuse"]
    assert reuse["holds"] is True and reuse["problem"] is None
    assert reuse["reused_blocks"] > 0 and reuse["reused_tokens"] == reuse["reused_blocks"] * 512
    w = load_workload(tmp_path / "w" / "workload.json").workload
    a, b, c = prompt_ids(w, 0), prompt_ids(w, 1), prompt_ids(w, 2)
    assert (len(a), len(b)) == (6955, 6472)
    assert (a[: 8 * 512] == b[: 8 * 512]).all()
    assert not (a[8 * 512 : 9 * 512] == b[8 * 512 : 9 * 512]).all()
    assert not (a[:512] == c[:512]).all()  # row 3's blocks are 19, 20, 21
    # the body carries that exact prompt and its own output length
    body = orjson.loads(request_body(w, 1))
    assert body["prompt"] == b.tolist()
    assert body["max_tokens"] == body["min_tokens"] == 26


def test_a_trace_whose_ids_do_not_chain_says_reuse_does_not_hold(
    cli: Cli, shared_fleet: SimFleet, tmp_path: Path
) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_text(
        '{"timestamp": 0, "input_length": 1024, "output_length": 4, "hash_ids": [1, 2]}\n'
        '{"timestamp": 10, "input_length": 1024, "output_length": 4, "hash_ids": [3, 2]}\n'
    )
    doc = _prepare(cli, shared_fleet, tmp_path / "w", "--trace", str(trace))
    reuse = doc["schedule"]["prefix_reuse"]
    assert reuse["holds"] is False
    assert reuse["problem"] == (
        "request 1: block id 2 follows block id 3, but block id 1 in an earlier request"
    )


def test_synthetic_arrivals_are_seeded(cli: Cli, shared_fleet: SimFleet, tmp_path: Path) -> None:
    """The same seed draws the same Poisson schedule and lengths; another seed other ones."""
    args = ("--arrivals", "poisson", "--rate", "5", "--requests", "40",
            "--input-lengths", "uniform:100-900", "--output-tokens", "8")  # fmt: skip
    one = _prepare(cli, shared_fleet, tmp_path / "a", *args)["schedule"]
    two = _prepare(cli, shared_fleet, tmp_path / "b", *args)["schedule"]
    assert one == two
    assert one["source"] == {
        "kind": "synthetic", "arrivals": "poisson", "rate": 5.0, "burstiness": None,
        "input_lengths": "uniform:100-900", "output_lengths": "8", "seed": 7,
    }  # fmt: skip
    gaps = [b - a for a, b in zip(one["due_offsets_ns"], one["due_offsets_ns"][1:], strict=False)]
    assert len(set(gaps)) > 30  # not evenly spaced
    assert set(one["output_tokens"]) == {8} and len(set(one["input_tokens"])) > 10
    assert all(100 <= x <= 900 for x in one["input_tokens"])
    proc = cli("prepare", "--base", str(shared_fleet.router_url), "--seed", "8",
               "--out", str(tmp_path / "c"), *args)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    other = orjson.loads((tmp_path / "c" / "workload.json").read_bytes())["schedule"]
    assert other["due_offsets_ns"] != one["due_offsets_ns"]


def test_gamma_replay_runs_and_judges_each_request_on_its_own_output(
    cli: Cli, shared_fleet: SimFleet, tmp_path: Path
) -> None:
    _prepare(cli, shared_fleet, tmp_path / "w", "--arrivals", "gamma", "--burstiness", "2",
             "--rate", "10", "--requests", "30", "--input-tokens", "256",
             "--output-lengths", "uniform:2-40")  # fmt: skip
    out = tmp_path / "run"
    proc = _replay(cli, shared_fleet, tmp_path / "w" / "workload.json", out, 2.0, attainment=0.5)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    _, records, summary = read_run(out)
    w = load_workload(tmp_path / "w" / "workload.json").workload
    assert w.schedule is not None
    for r in records:
        assert r["completion_tokens"] == w.schedule.output_tokens[r["sequence"]]
    assert summary["good"] == sum(r["good"] for r in records) >= 15
    assert summary["schedule"]["source"] == "synthetic"


def test_the_runbook_workload_and_run_have_no_schedule(
    cli: Cli, shared_fleet: SimFleet, tmp_path: Path
) -> None:
    """Without any schedule option the files are what they always were: no schedule key in the
    workload or the summary, no speedup in the manifest's arguments."""
    path = prepare_workload(str(shared_fleet.router_url), tmp_path)
    doc = orjson.loads(path.read_bytes())
    assert "schedule" not in doc and doc["sampler"] == "pool-uniform-v1"
    out = tmp_path / "run"
    proc = cli(*run_args(str(shared_fleet.router_url), path, out, requests=4, attainment=0.5))
    assert proc.returncode == 0, proc.stderr
    manifest, _, summary = read_run(out)
    assert "schedule" not in summary and "speedup" not in manifest["arguments"]
    assert proc.stdout.startswith("rate 20/s: ")


def test_clip_to_model_clips_and_counts(cli: Cli, shared_fleet: SimFleet, tmp_path: Path) -> None:
    """A request longer than the served 32,768 tokens is refused, naming it; with
    --clip-to-model its input is shortened to fit and the workload counts it."""
    trace = tmp_path / "long.jsonl"
    trace.write_text(
        '{"timestamp": 0, "input_length": 100, "output_length": 4}\n'
        '{"timestamp": 5, "input_length": 40000, "output_length": 16}\n'
    )
    out = tmp_path / "refused"
    proc = cli("prepare", "--base", str(shared_fleet.router_url), "--seed", "1",
               "--out", str(out), "--trace", str(trace))  # fmt: skip
    assert proc.returncode == 1 and not out.exists()
    assert proc.stderr.strip() == (
        f"load_trial.py: error: 1 of 2 requests of trace {trace} do not fit the served "
        "max_model_len 32768 (/tokenize); the longest, row 2, has 40000 input + 16 output "
        "tokens. Take another window, or pass --clip-to-model to clip them"
    )
    doc = _prepare(cli, shared_fleet, tmp_path / "w", "--trace", str(trace), "--clip-to-model")
    assert doc["schedule"]["input_tokens"] == [100, 32768 - 16]
    assert doc["schedule"]["source"]["clipped"] == 1
    assert (doc["input_tokens"], doc["output_tokens"]) == (32768 - 16, 16)


MOONCAKE = '{"timestamp": 0, "input_length": 10, "output_length": 5}\n'
PREPARE_REFUSALS: list[tuple[list[str], str | None, str]] = [
    (["--trace", "{trace}", "--rate", "3"], MOONCAKE,
     "--rate cannot be used with --trace: the trace gives each request's arrival and lengths"),
    (["--trace", "{trace}", "--input-tokens", "9"], MOONCAKE,
     "--input-tokens cannot be used with --trace: the trace gives each request's arrival and "
     "lengths"),
    (["--input-tokens", "9", "--output-tokens", "9", "--start", "5"], None,
     "--start cannot be used without --trace"),
    (["--input-tokens", "9", "--output-tokens", "9", "--rate", "5"], None,
     "--rate cannot be used without --arrivals (constant, poisson or gamma)"),
    (["--arrivals", "poisson", "--requests", "5", "--input-tokens", "9", "--output-tokens", "9"],
     None, "--arrivals poisson needs --rate and --requests"),
    (["--arrivals", "poisson", "--rate", "2", "--requests", "5", "--burstiness", "2",
      "--input-tokens", "9", "--output-tokens", "9"], None,
     "burstiness applies to gamma arrivals only, not poisson"),
    (["--arrivals", "constant", "--rate", "2", "--requests", "5", "--input-tokens", "9",
      "--input-lengths", "uniform:1-9", "--output-tokens", "9"], None,
     "give --input-tokens (fixed) or --input-lengths (drawn), not both"),
    (["--arrivals", "constant", "--rate", "2", "--requests", "5", "--input-lengths", "normal:9",
      "--output-tokens", "9"], None, "--input-lengths 'normal:9': not a length; use N, "
     "uniform:LO-HI, normal:MEAN,SD or lognormal:MEDIAN,SIGMA"),
    (["--trace", "{trace}"], MOONCAKE + '{"timestamp": 5, "input_length": 0, "output_length": 5}\n',
     "trace {trace} row 2: input_length: must be at least 1, got 0"),
    (["--trace", "{trace}"], '{"timestamp": 9, "input_length": 1, "output_length": 5}\n'
     '{"timestamp": 3, "input_length": 1, "output_length": 5}\n',
     "trace {trace} row 2: timestamp: 3 ms is earlier than row 1's 9 ms; a trace must be in time "
     "order"),
    (["--trace", "{trace}"], MOONCAKE + "{oops\n", "trace {trace} row 2: not JSON ("),
    (["--trace", "{trace}", "--trace-format", "burstgpt"], "Timestamp,Model\n1,M\n",
     "trace {trace} row 1: Request tokens: missing column (the header has Timestamp, Model)"),
    (["--trace", "{trace}", "--start", "60"], MOONCAKE,
     "no request at or after 60 s of {trace} (1 rows over 0 s)"),
]  # fmt: skip


@pytest.mark.parametrize(("args", "text", "message"), PREPARE_REFUSALS)
def test_prepare_refusals_are_one_line_and_write_nothing(
    cli: Cli,
    shared_fleet: SimFleet,
    tmp_path: Path,
    args: list[str],
    text: str | None,
    message: str,
) -> None:
    trace = tmp_path / "t.jsonl"
    if text is not None:
        trace.write_text(text)
    out = tmp_path / "w"
    argv = [a.replace("{trace}", str(trace)) for a in args]
    proc = cli("prepare", "--base", str(shared_fleet.router_url), "--seed", "1",
               "--out", str(out), *argv)  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("load_trial.py: error: " + message.replace("{trace}", str(trace)))
    assert not out.exists()


def test_run_refusals_name_the_flag_and_write_nothing(
    cli: Cli, shared_fleet: SimFleet, tmp_path: Path
) -> None:
    """--rate or --requests with a scheduled workload (use --speedup), --speedup with the
    runbook's, a speedup out of range: exit 1, one line, no run folder."""
    base = str(shared_fleet.router_url)
    _prepare(cli, shared_fleet, tmp_path / "w", "--trace", str(EXAMPLES / "azure.csv"))
    traced = tmp_path / "w" / "workload.json"
    runbook = prepare_workload(base, tmp_path)
    out = tmp_path / "run"

    def bounds(workload: Path) -> list[str]:
        return ["run", "--base", base, "--workload", str(workload), "--out", str(out),
                "--ttft", "2", "--tpot", "0.03", "--attainment", "0.9"]  # fmt: skip

    cases = [
        (run_args(base, traced, out), f"--rate and --requests cannot be used with workload "
         f"{traced}: its 15 requests keep their own due times (trace); use --speedup X to scale "
         "its time axis"),
        (run_args(base, runbook, out, speedup=2), "--speedup applies to a scheduled workload "
         f"(prepare --trace or --arrivals); workload {runbook} is the runbook's, run at --rate "
         "with --requests"),
        ([*bounds(traced), "--speedup", "0"],
         "--speedup must be a number > 0 and at most 1000, got 0.0"),
        (bounds(runbook),
         f"workload {runbook} is the runbook's workload: give --rate and --requests"),
    ]  # fmt: skip
    for argv, message in cases:
        proc = cli(*argv)
        assert proc.returncode == 1, (argv, proc.stdout, proc.stderr)
        assert proc.stderr.strip() == f"load_trial.py: error: {message}", argv
        assert not out.exists()


def test_report_shows_the_trace_views_of_a_replay(
    cli: Cli, shared_fleet: SimFleet, tmp_path: Path
) -> None:
    """narwhal-report on a trace replay's run folder: the scheduled-workload part with its
    offered load, lengths, attainment per bucket and the per-request timeline."""
    _prepare(cli, shared_fleet, tmp_path / "w", "--trace", str(EXAMPLES / "azure.csv"))
    out = tmp_path / "run"
    proc = _replay(cli, shared_fleet, tmp_path / "w" / "workload.json", out, 10.0, attainment=0.5)
    assert proc.returncode == 0, proc.stderr
    page = tmp_path / "report.html"
    rep = subprocess.run(
        [sys.executable, "-m", "narwhal_report", str(out), "--out", str(page)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert rep.returncode == 0, rep.stderr
    html = page.read_text()
    assert "Scheduled workload: trace at speedup 10x" in html
    for needle in ("Offered load", "Lengths", "Attainment per", "densest second"):
        assert needle.lower() in html.lower(), needle


def test_edge_searches_a_scheduled_workload_on_its_speedup(
    cli: Cli, shared_fleet: SimFleet, tmp_path: Path
) -> None:
    """edge on a scheduled workload varies --speedup: trial folders named by it, each run's
    manifest at that speedup and its mean rate, edge.json saying what was searched."""
    _prepare(cli, shared_fleet, tmp_path / "w", "--arrivals", "constant", "--rate", "5",
             "--requests", "6", "--input-tokens", "64", "--output-tokens", "4")  # fmt: skip
    workload = tmp_path / "w" / "workload.json"
    out = tmp_path / "edge"
    args = ["edge", "--base", str(shared_fleet.router_url), "--workload", str(workload),
            "--ttft", "2", "--tpot", "0.0333", "--attainment", "0.5", "--max-lag", "0.25",
            "--out", str(out), "--max-trials", "2", "--start-speedup", "2"]  # fmt: skip
    proc = cli(*args)
    assert proc.returncode == 2, proc.stdout + proc.stderr  # two passes: the budget ran out
    assert "doubling from speedup 2x" in proc.stdout and "trial 2 at 4x" in proc.stdout
    doc = orjson.loads((out / "edge.json").read_bytes())
    assert doc["inputs"]["searched"] == "speedup" and doc["inputs"]["requests"] == 6
    assert [t["run"] for t in doc["trials"]] == ["trial-01-speedup-2", "trial-02-speedup-4"]
    for trial, speedup in zip(doc["trials"], (2.0, 4.0), strict=True):
        manifest, _, _ = read_run(out / trial["run"])
        assert manifest["arguments"]["speedup"] == trial["speedup"] == speedup
        assert manifest["rate"] == trial["rate"] == pytest.approx(5.0 * speedup)
    refused = cli(*args[:-2], "--start-rate", "3")
    assert refused.returncode == 1
    assert "--start-rate cannot be used with workload" in refused.stderr
    assert "use --start-speedup X" in refused.stderr
