"""``make demo``: the whole runbook against the embedded simulated fleet, start to finish.

Starts a ``narwhal-sim`` fleet (``examples/sim-fleet.json`` on fresh loopback ports, with its
router on 127.0.0.1:18000 and a journal), profiles it with ``narwhal-profile``, prepares the
runbook's workload, probes each engine against its profile (``narwhal-profile --verify``), runs
``check`` (with the probe), predicts both rates from the profiles and the probe (``predict
--calibrate``, with the highest passing rate), runs the trial at 0.5 and then 1 request/s (20
requests each by default; ``FULL=1`` runs the runbook's 200), then once past the fleet's edge (12
request/s, the runbook's 200 requests: what a miss looks like, which ``predict`` shows from the
throughput bound of the profiled engines; the runbook itself stops at its first miss), reads the
engines' own view of each run (their ``/metrics`` around it and their per-request trace spans
through ``run --fleet --otlp-receiver``: the client-added TTFT and the per-engine split),
reconciles each run with the router journal, then measures the edge (``load_trial.py edge``: from
the predicted band, bisecting on rate to within 10 % in at most 5 trials of 50 requests), prints a
verdict per rate and the bracket, writes the run's report (``narwhal-report``: ``report.html``, its
path is the last line printed), compares the sweep's two runs (``load_trial.py compare``: the 1
request/s run against the 0.5 one, the same fleet at twice the load; a worse measure, exit 2, is a
verdict), and stops everything it started, also on errors and Ctrl-C.
Everything is written under a fresh private ``runs/demo-XXXXXXXX`` folder; nothing else in the
checkout changes.

Exit status: 0 when every step ran as expected (a rate that misses its target is a verdict, not a
failure), 1 when a step failed unexpectedly, 130 when interrupted.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from narwhal_sim.testing import free_port

REPO = Path(__file__).resolve().parents[1]
LAUNCHER = REPO / "tools" / "measurement" / "load_trial.py"
ROUTER_PORT = 18000
RATES = (0.5, 1.0)
# Past this fleet's edge (predict puts it near 7 request/s for 200 requests), with the runbook's
# 200 requests: fewer never queue long enough to miss. The profile's small decode sweep does not
# cover the batches it builds, so `predict` gives no latencies there: the throughput bound of the
# profiled engines shows the miss (`MISS (bound)`).
OVERLOAD_RATE, OVERLOAD_REQUESTS = 12.0, 200
DESCRIPTION = "make demo: the runbook against the embedded simulated fleet, start to finish."
# The runbook's shape and target.
INPUT_TOKENS, OUTPUT_TOKENS, SEED = 8192, 128, 1729
TTFT_S, TPOT_S, ATTAINMENT = 2.0, 0.0333, "0.95"
KV_TRANSFER_S_PER_TOKEN = 2.5e-6  # the simulator's default (no profile measures it)
# A small sweep that still covers the workload (8192 input tokens): about 35 s of simulated time.
# Decode concurrency up to 16 covers the batches near the edge of 50 requests (about 7 request/s),
# so the edge search starts from a band the target sets, not the profiled domain.
PROFILE_SWEEP = (
    "--prefill-lens", "2048,4096,8192,12288",
    "--decode-input-lens", "4096,8192",
    "--decode-concurrency", "1,4,16",
    "--decode-tokens", "64",
)  # fmt: skip
# The measured edge: 50 requests per trial (fewer never queue long enough to miss near the edge;
# FULL=1: the runbook's 200), to within 10 % in at most 5 trials, from the predicted band.
EDGE_REQUESTS, EDGE_TOLERANCE, EDGE_MAX_TRIALS = 50, "0.1", "5"


class StepFailed(Exception):
    """A demo step did not end as expected."""


def say(text: str = "") -> None:
    """Print one line of the demo's story, at once."""
    print(text, flush=True)


def port_is_free(port: int) -> bool:
    """True when 127.0.0.1:port can be bound."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def write_fleet(folder: Path, otlp_port: int) -> tuple[Path, Path, list[dict[str, Any]]]:
    """The example fleet on fresh ports (profiles land beside it), and the example sim config
    with every engine exporting its trace spans to 127.0.0.1:``otlp_port`` (the trials'
    ``--otlp-receiver``; between trials nothing listens and the engines drop them)."""
    fleet = json.loads((REPO / "examples" / "sim-fleet.json").read_text())
    for engine in fleet["engines"]:
        engine["url"] = f"http://127.0.0.1:{free_port()}"
    fleet_path = folder / "fleet.json"
    fleet_path.write_text(json.dumps(fleet, indent=2) + "\n")
    sim_path = folder / "sim-config.json"
    sim = json.loads((REPO / "examples" / "sim-config.json").read_text())
    sim["defaults"]["otlp_traces_endpoint"] = f"http://127.0.0.1:{otlp_port}/v1/traces/{{iid}}"
    sim_path.write_text(json.dumps(sim, indent=2) + "\n")
    return fleet_path, sim_path, list(fleet["engines"])


def write_launch_records(folder: Path, engines: Sequence[dict[str, Any]]) -> list[Path]:
    """One launch record per engine: the ``vllm serve`` line each simulated engine stands for."""
    folder.mkdir(mode=0o700)
    paths = []
    for engine in engines:
        port = engine["url"].rsplit(":", 1)[1]
        path = folder / f"{engine['iid']}.txt"
        path.write_text(
            "# simulated by narwhal-sim (make demo)\n"
            f"vllm serve meta-llama/Llama-3.1-8B-Instruct --served-model-name {engine['model']} "
            f"--max-model-len 16384 --no-enable-prefix-caching --port {port}\n"
        )
        paths.append(path)
    return paths


@contextlib.contextmanager
def sim_fleet(
    folder: Path, fleet: Path, sim_config: Path, router_port: int, time_scale: float
) -> Iterator[str]:
    """Run ``narwhal-sim up`` with the router until the block ends; yields the router URL."""
    ready = folder / "sim-ready.json"
    log = (folder / "sim.log").open("wb")
    cmd = [
        sys.executable, "-m", "narwhal_sim", "up", "--fleet", str(fleet),
        "--sim-config", str(sim_config), "--router", f"127.0.0.1:{router_port}",
        "--journal", str(folder / "router-journal.jsonl"), "--ready-file", str(ready),
        "--time-scale", repr(time_scale),
    ]  # fmt: skip
    # its own session: Ctrl-C reaches the demo, which then stops the fleet in order
    proc = subprocess.Popen(
        cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    log.close()
    try:
        deadline = time.monotonic() + 30
        while not ready.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                tail = (folder / "sim.log").read_text(errors="replace")[-800:]
                raise StepFailed(f"narwhal-sim did not start:\n{tail}")
            time.sleep(0.05)
        yield str(json.loads(ready.read_text())["router"])
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        say(f"   simulated fleet stopped (log: {folder / 'sim.log'})")


def step(title: str, cmd: Sequence[str], *, ok: Sequence[int] = (0,)) -> int:
    """Run one command, print its output indented; StepFailed unless its exit code is in ``ok``."""
    say(f"== {title}")
    say("   $ " + " ".join(_short(c) for c in cmd))
    started = time.monotonic()
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO
    )
    try:
        stdout, stderr = proc.communicate()
    except KeyboardInterrupt:
        _interrupt(proc)
        raise
    for line in (stdout + stderr).strip().splitlines():
        say(f"   {line}")
    say(f"   (exit {proc.returncode}, {time.monotonic() - started:.1f} s)")
    if proc.returncode == 130:
        raise KeyboardInterrupt
    if proc.returncode not in ok:
        raise StepFailed(f"{title}: exit {proc.returncode}")
    return proc.returncode


def _interrupt(proc: subprocess.Popen[str]) -> None:
    """Let an interrupted step close its records (a trial writes its partial summary), then stop it.

    A terminal's Ctrl-C already reached the step; otherwise it is forwarded after 2 s.
    """
    for signal_to_send in (None, signal.SIGINT, signal.SIGKILL):
        if signal_to_send is not None:
            proc.send_signal(signal_to_send)
        try:
            stdout, stderr = proc.communicate(timeout=2 if signal_to_send is None else 30)
        except subprocess.TimeoutExpired:
            continue
        for line in (stdout + stderr).strip().splitlines():
            say(f"   {line}")
        say(f"   (exit {proc.returncode}: interrupted)")
        return


def _short(arg: str) -> str:
    return arg.replace(str(REPO) + "/", "") if arg.startswith(str(REPO)) else arg


def profile_command() -> list[str]:
    """``narwhal-profile`` from the same environment (its module when the script is absent)."""
    script = Path(sys.executable).parent / "narwhal-profile"
    return [str(script)] if script.exists() else [sys.executable, "-m", "narwhal_profile_cli"]


def report_command() -> list[str]:
    """``narwhal-report`` from the same environment (its module when the script is absent)."""
    script = Path(sys.executable).parent / "narwhal-report"
    return [str(script)] if script.exists() else [sys.executable, "-m", "narwhal_report"]


def write_report(folder: Path, store: Path, scale: float) -> Path:
    """The run's report: the profiles and every rate that ran, as one offline HTML page."""
    out = folder / "report.html"
    runs = sorted(p for p in (folder / "trial").glob("rate-*") if (p / "summary.json").is_file())
    edge = [p for p in [folder / "trial" / "edge"] if (p / "edge.json").is_file()]
    step(
        "report: profiles, trials and the measured edge as one HTML page",
        [*report_command(), str(store), *map(str, runs), *map(str, edge), "--out", str(out),
         "--kv-transfer-s-per-token", f"{KV_TRANSFER_S_PER_TOKEN / scale:g}"],
    )  # fmt: skip
    return out


def trial(*args: str) -> list[str]:
    """The runbook's command line for ``load_trial.py``."""
    return [sys.executable, str(LAUNCHER), *args]


@dataclass(frozen=True)
class Server:
    """What each trial reads of the server: the fleet's pages and the engines' spans."""

    fleet: Path
    otlp_port: int

    def args(self) -> list[str]:
        """``run``'s options for them."""
        return ["--fleet", str(self.fleet), "--otlp-receiver", f"127.0.0.1:{self.otlp_port}",
                "--otlp-wait", "5"]  # fmt: skip


def run_rates(
    base: str, folder: Path, requests: int, scale: float, server: Server
) -> dict[float, str]:
    """The runbook's sweep: 0.5 then 1 request/s, stopping at the first rate that misses."""
    verdicts: dict[float, str] = {}
    for rate in RATES:
        summary = run_rate(base, folder, rate, requests, scale, server)
        verdicts[rate] = _verdict(summary, scale) + "\n" + server_line(folder, rate, scale)
        if summary["exit_code"] != 0:
            if not summary["client_schedule_valid"]:
                raise StepFailed(f"client scheduling missed at {rate:g} request/s")
            say("   the rate missed its target: the runbook ends the sweep here")
            break
    return verdicts


def run_rate(
    base: str, folder: Path, rate: float, requests: int, scale: float, server: Server
) -> dict[str, Any]:
    """One trial (a miss is a verdict, exit 2) reconciled with the router journal; its summary."""
    out = folder / f"rate-{rate:g}"
    step(
        f"trial at {rate:g} request/s ({requests} requests)",
        trial(
            "run", "--base", base, "--workload", str(folder / "workload" / "workload.json"),
            "--rate", f"{rate * scale:g}", "--requests", str(requests),
            "--ttft", f"{TTFT_S / scale:g}", "--tpot", f"{TPOT_S / scale:g}",
            "--attainment", ATTAINMENT, "--out", str(out), *server.args(),
        ),
        ok=(0, 2),
    )  # fmt: skip
    step(
        f"reconcile the {rate:g} request/s records with the router journal",
        trial(
            "reconcile", "--requests", str(out / "requests.jsonl"),
            "--journal", str(folder.parent / "router-journal.jsonl"),
        ),
    )  # fmt: skip
    summary: dict[str, Any] = json.loads((out / "summary.json").read_text())
    return summary


def predict_rates(
    folder: Path, fleet: Path, store: Path, requests: int, scale: float
) -> dict[float, str]:
    """``predict`` at each rate of the sweep (and the highest passing rate) before the trial."""
    return {
        rate: predict_rate(folder, fleet, store, rate, requests, scale, find_max=k == 0)
        for k, rate in enumerate(RATES)
    }


def predict_rate(
    folder: Path,
    fleet: Path,
    store: Path,
    rate: float,
    requests: int,
    scale: float,
    *,
    find_max: bool = False,
) -> str:
    """One ``predict``, with each engine's speed from the probe taken after the profile; its
    verdict line (exit 0 pass, 2 miss, the throughput bound's included), or why it refused (beyond
    the profiled domain, neither a pass nor a miss shown: exit 1)."""
    out = folder / f"prediction-{rate:g}.json"
    title = f"predict {rate:g} request/s ({requests} requests) from the profiles"
    code = step(
        title + (" and the highest passing rate" if find_max else ""),
        trial(
            "predict", "--fleet", str(fleet), "--profiles", str(store),
            "--input-tokens", str(INPUT_TOKENS), "--output-tokens", str(OUTPUT_TOKENS),
            "--requests", str(requests), "--rate", f"{rate * scale:g}",
            "--ttft", f"{TTFT_S / scale:g}", "--tpot", f"{TPOT_S / scale:g}",
            "--attainment", ATTAINMENT,
            "--kv-transfer-s-per-token", f"{KV_TRANSFER_S_PER_TOKEN / scale:g}",
            "--calibrate", str(folder.parent / "probe.json"),
            "--out", str(out), *(["--find-max-rate"] if find_max else []),
        ),
        ok=(0, 1, 2),
    )  # fmt: skip
    if code == 1:
        return "refused: beyond what the profiles measured (see its step above)"
    p = json.loads(out.read_text())["prediction"]
    lo, hi = p["attainment_interval"]["low"], p["attainment_interval"]["high"]
    if p.get("bound") is not None:
        b = p["bound"]
        return (
            f"MISS (bound): at most {p['good']}/{requests} good (need {p['required_good']}): "
            "held at their profiled concurrency the engines complete at most "
            f"{_per_s(b['throughput_bound'], scale)}, so from request {b['first_miss']} on the "
            f"queue breaks the SLO; the fits extended beyond it leave {b['extended_good']} good"
        )
    return (
        f"{'PASS' if p['pass'] else 'MISS'}: {p['good']}/{requests} good, attainment "
        f"{p['attainment']:.3f} [{lo:.3f}, {hi:.3f}], TTFT p99 "
        f"{_ms(p['ttft_s']['p99'] * scale)}, TPOT p99 {_ms(p['tpot_s']['p99'] * scale)}"
    )


def capacity_line(folder: Path, rate: float, requests: int, scale: float) -> str:
    """The sustainable rate beside the trial-sized edge, from ``predict --find-max-rate``'s
    document at ``rate``; a trial-sized edge far above it is qualified."""
    path = folder / f"prediction-{rate:g}.json"
    search = json.loads(path.read_text())["search"] if path.is_file() else None
    if search is None or search.get("sustainable") is None:
        return "not predicted"
    s = search["sustainable"]
    line = f"sustainable {_per_s(s['rate'], scale)} ({s['source']})"
    edge = f"the {requests}-request edge {_per_s(search['max_rate'], scale)}"
    if s["trial_too_short"]:
        return (
            f"{line}; {edge} is a trial too short to test capacity (at that rate "
            f"{s['requests_to_test']} requests would miss)"
        )
    return f"{line}; {edge}"


def measure_edge(
    base: str, folder: Path, fleet: Path, store: Path, requests: int, scale: float
) -> str:
    """``load_trial.py edge`` from the predicted band; a line with the bracket and the trials it
    took (exit 2, the budget spent first, is a verdict too; exit 1 fails the demo)."""
    out = folder / "edge"
    step(
        f"measure the edge from the predicted band ({requests} requests per trial)",
        trial(
            "edge", "--base", base, "--workload", str(folder / "workload" / "workload.json"),
            "--requests", str(requests), "--ttft", f"{TTFT_S / scale:g}",
            "--tpot", f"{TPOT_S / scale:g}", "--attainment", ATTAINMENT, "--out", str(out),
            "--fleet", str(fleet), "--profiles", str(store),
            "--kv-transfer-s-per-token", f"{KV_TRANSFER_S_PER_TOKEN / scale:g}",
            "--tolerance", EDGE_TOLERANCE, "--max-trials", EDGE_MAX_TRIALS,
        ),
        ok=(0, 2),
    )  # fmt: skip
    doc: dict[str, Any] = json.loads((out / "edge.json").read_text())
    b, band = doc["bracket"], doc["predicted"] or {}
    found = "within" if b["within_tolerance"] else "NOT within"
    return (
        f"highest pass {_per_s(b['highest_pass'], scale)}, lowest miss "
        f"{_per_s(b['lowest_miss'], scale)}: {found} {float(EDGE_TOLERANCE):.0%} after "
        f"{len(doc['trials'])} trial(s) of at most {EDGE_MAX_TRIALS}; predicted pass_50 "
        f"{_per_s(band.get('pass_50'), scale)}, sustainable "
        f"{_per_s(band.get('sustainable_rate'), scale)}"
    )


def compare_runs(folder: Path) -> str:
    """``compare`` of the sweep's two runs (B the higher rate, A the lower: the same fleet and
    workload at twice the load); its verdict line. Exit 2 (something got worse) is a verdict, as a
    trial's miss is; a refusal (exit 1) fails the demo."""
    a, b = (folder / f"rate-{rate:g}" for rate in RATES)
    if not (b / "summary.json").is_file():
        return "not compared (the sweep ended before its second rate)"
    out = folder / "comparison.json"
    step(
        f"compare the {RATES[1]:g} request/s run (B) with the {RATES[0]:g} request/s run (A)",
        trial("compare", str(a), str(b), "--out", str(out)),
        ok=(0, 2),
    )
    doc: dict[str, Any] = json.loads(out.read_text())
    verdict = f"worse: {'; '.join(doc['worse'])}" if doc["worse"] else "nothing got worse"
    return (
        f"{RATES[1]:g} against {RATES[0]:g} request/s at {doc['confidence']:.0%}: {verdict} "
        f"(exit {doc['exit_code']}; {_short(str(out))})"
    )


def server_line(folder: Path, rate: float, scale: float) -> str:
    """The server's side of one trial, in the fleet's own time: the client-added TTFT per
    request (client TTFT x time scale - the engines' span TTFT) and each engine's share."""
    out = folder / f"rate-{rate:g}"
    summary = json.loads((out / "summary.json").read_text())
    view = summary.get("server")
    if view is None:
        return "     server view: none"
    added = []
    for line in (out / "requests.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record.get("server") and record["ttft_s"] is not None:
            added.append(record["ttft_s"] * scale - record["server"]["ttft_s"])
    split = ", ".join(
        f"{e['name']} {e['completed']}" + (f" ({e['share'] * 100:.0f} %)" if e["share"] else "")
        for e in view["engines"]
    )
    spans = view.get("spans") or {}
    matched = f"{spans.get('matched', 0)}/{spans.get('client_completed', 0)} matched to spans"
    if not added:
        return f"     server: engines {split}; {matched}"
    added.sort()
    p50, top = added[len(added) // 2], added[-1]
    return (
        f"     server: client-added TTFT p50 {_ms(p50)}, max {_ms(top)} ({matched}); "
        f"engines {split}"
    )


def _per_s(rate: float | None, scale: float) -> str:
    return "none" if rate is None else f"{rate / scale:.4g} request/s"


def _verdict(summary: dict[str, Any], scale: float) -> str:
    """A measured verdict line, times in the simulated fleet's own time (as predictions show)."""
    word = "PASS" if summary["exit_code"] == 0 else "MISS"
    schedule = "schedule valid" if summary["client_schedule_valid"] else "schedule INVALID"
    ttft, tpot = summary["ttft_s"]["p99"], summary["tpot_s"]["p99"]
    return (
        f"{word}: {summary['good']}/{summary['requests']} good (need {summary['required_good']}), "
        f"{schedule}, TTFT p99 {_ms(None if ttft is None else ttft * scale)}, "
        f"TPOT p99 {_ms(None if tpot is None else tpot * scale)}"
    )


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 1000:.1f} ms"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Options: the request count (FULL=1 gives the runbook's 200) and a time scale."""
    full = os.environ.get("FULL", "") not in ("", "0")
    parser = argparse.ArgumentParser(prog="tools/demo.py", description=DESCRIPTION)
    parser.add_argument(
        "--requests", type=int, default=200 if full else 20,
        help="requests per rate (default 20; FULL=1 in the environment: 200)",
    )  # fmt: skip
    parser.add_argument(
        "--time-scale", type=float, default=1.0,
        help="run the simulated fleet X times faster (rates x X, latency bounds / X)",
    )  # fmt: skip
    parser.add_argument(
        "--runs", type=Path, default=REPO / "runs",
        help="folder that receives the demo-XXXXXXXX run folder (default: runs/)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.requests < 1 or not args.time_scale > 0:
        parser.error("--requests and --time-scale must be positive")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run the demo; returns the exit status."""
    args = parse_args(argv)
    runs: Path = args.runs
    runs.mkdir(mode=0o700, parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="demo-", dir=runs))  # 0700
    say(f"narwhal demo in {_short(str(folder))} ({args.requests} requests per rate)")
    port = ROUTER_PORT if port_is_free(ROUTER_PORT) else free_port()
    if port != ROUTER_PORT:
        say(f"   127.0.0.1:{ROUTER_PORT} is busy: the router uses port {port} instead")
    otlp_port = free_port()
    fleet, sim_config, engines = write_fleet(folder, otlp_port)
    server = Server(fleet, otlp_port)
    verdicts: dict[float, str] = {}
    predicted: dict[float, str] = {}
    edge = "not measured"
    capacity = "not predicted"
    compared = "not compared"
    try:
        say(f"== start the simulated fleet ({len(engines)} engines) and its router")
        with sim_fleet(folder, fleet, sim_config, port, args.time_scale) as base:
            say(f"   router {base}, journal {_short(str(folder / 'router-journal.jsonl'))}")
            step("profile the fleet", [*profile_command(), "--fleet", str(fleet), *PROFILE_SWEEP])
            store = folder / "profiles" / "fleet-profiles.json"
            probe = folder / "probe.json"
            step(
                "probe each engine against its profile (how fast it runs now)",
                [*profile_command(), "--fleet", str(fleet), "--verify", str(store),
                 "--out", str(probe)],
                ok=(0, 3),
            )  # fmt: skip
            records = write_launch_records(folder / "launch", engines)
            tdir = folder / "trial"
            tdir.mkdir(mode=0o700)
            step("prepare the workload", trial(
                "prepare", "--base", base, "--input-tokens", str(INPUT_TOKENS),
                "--output-tokens", str(OUTPUT_TOKENS), "--seed", str(SEED),
                "--out", str(tdir / "workload"),
            ))  # fmt: skip
            launch = [a for r in records for a in ("--launch-record", str(r))]
            step("check before the trial", trial(
                "check", "--workload", str(tdir / "workload" / "workload.json"),
                "--fleet", str(fleet), "--profiles", str(store), *launch, "--probe", str(probe),
            ))  # fmt: skip
            predicted = predict_rates(tdir, fleet, store, args.requests, args.time_scale)
            capacity = capacity_line(tdir, RATES[0], args.requests, args.time_scale)
            verdicts = run_rates(base, tdir, args.requests, args.time_scale, server)
            say(f"== past the edge: {OVERLOAD_RATE:g} request/s, {OVERLOAD_REQUESTS} requests")
            say("   (not the runbook's: it shows what a miss looks like, predicted and measured)")
            predicted[OVERLOAD_RATE] = predict_rate(
                tdir, fleet, store, OVERLOAD_RATE, OVERLOAD_REQUESTS, args.time_scale
            )
            overload = run_rate(
                base, tdir, OVERLOAD_RATE, OVERLOAD_REQUESTS, args.time_scale, server
            )
            verdicts[OVERLOAD_RATE] = (
                _verdict(overload, args.time_scale)
                + "\n"
                + server_line(tdir, OVERLOAD_RATE, args.time_scale)
            )
            edge_requests = max(EDGE_REQUESTS, args.requests)
            edge = measure_edge(base, tdir, fleet, store, edge_requests, args.time_scale)
        report = write_report(folder, store, args.time_scale)  # the fleet is stopped: offline
        compared = compare_runs(folder / "trial")
    except StepFailed as exc:
        say(f"demo FAILED: {exc}")
        return 1
    except KeyboardInterrupt:
        say("demo interrupted; everything it started is stopped")
        return 130
    say("== verdict per rate: predicted from the profiles, then measured")
    for rate in (*RATES, OVERLOAD_RATE):
        say(f"   {rate:g} request/s predicted: {predicted.get(rate, 'n/a')}")
        say(f"   {rate:g} request/s measured:  {verdicts.get(rate, 'not run (the sweep ended)')}")
    say(f"== predicted capacity: {capacity}")
    say(f"== measured edge: {edge}")
    say(f"== compared: {compared}")
    say(f"all records: {_short(str(folder))}")
    say(f"report: {_short(str(report))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
