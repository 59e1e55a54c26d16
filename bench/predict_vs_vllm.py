"""The backtest of ``predict`` against trials (``make bench-predict``; not a timed test).

Variants, one after the other (never two at once):

- ``sim``: ``narwhal-sim``, one mixed engine with its step noise on (``bench/predict_vs_trial.py``,
  ``backtest_target``);
- ``vllm-default``: vLLM 0.32's own CPU server (the conformance tier's venv, model and CPU split)
  at its default per-step budget (2,048 tokens, given to the profile in a limits file) and
  ``--max-num-seqs 8``;
- ``vllm-256``: the same server with ``--max-num-batched-tokens 256`` and its development
  endpoints on (``VLLM_SERVER_DEV_MODE=1``: the profile reads the budget from the engine).

Each is profiled once (with ``--mixing`` on vLLM); then per workload shape (two each, inside the
sweep's domain) ``bench/_backtest.py`` probes the engine, predicts the edge with the probe and
predicts every rate from 0.5 to 1.5 times it with and without the probe, and runs a 60-request
trial at each; ``bench/_backtest_report.py`` scores the forecasts (``bench/_forecast_scores.py``)
and writes the table between the backtest's markers in docs/benchmarks.md.

Run: ``.venv/bin/python bench/predict_vs_vllm.py [--json FILE]`` (about an hour);
``--quick`` the simulator alone at four rates (a few minutes, docs left alone); ``--replay DIR``
scores a finished work folder again without running anything; ``--replay DIR --repredict`` copies
it to ``DIR-repredicted-STAMP``, makes every prediction again there with the predictor installed
now (same profiles, probes and trials; no engine runs), and scores the copy.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench._backtest import (  # noqa: E402 - after the path
    FACTORS,
    QUICK_FACTORS,
    Shape,
    Target,
    measure_variant,
    repredict,
    write_json,
)
from bench._backtest_report import (  # noqa: E402 - after the path
    backtest_figures,
    machine,
    markdown,
    publish,
)
from bench.predict_vs_trial import backtest_target  # noqa: E402 - after the path
from tools.conformance import _commands as cmd  # noqa: E402 - after the path
from tools.conformance._edge_check import MAX_NUM_SEQS, write_limits  # noqa: E402 - after the path
from tools.conformance._edge_claims import ATTAINMENT, REQUESTS  # noqa: E402 - after the path
from tools.conformance._model import build_model  # noqa: E402 - after the path
from tools.conformance._server import SERVED_MODEL, running  # noqa: E402 - after the path
from tools.conformance._suite import ENGINE_CONTRACT, IID  # noqa: E402 - after the path
from tools.conformance._venv import default_venv, ensure_venv  # noqa: E402 - after the path

from narwhal_sim.testing import free_port  # noqa: E402 - after the path

VARIANTS = ("sim", "vllm-default", "vllm-256")
DOCS = REPO / "docs" / "benchmarks.md"
SHAPES = (Shape(512, 32), Shape(256, 64))
#: Both shapes inside it: prompts of 256 and 512 tokens, decode contexts 288 and 528, batches up
#: to the server's ``--max-num-seqs``; 192-token cohorts, as the conformance tier's (vLLM's CPU
#: server flushes some cohorts in bursts that leave a shorter one no window to time).
SWEEP = (
    "--prefill-lens", "128,256,512,1024",
    "--decode-input-lens", "128,512",
    "--decode-concurrency", f"1,2,4,{MAX_NUM_SEQS}",
    "--decode-tokens", "192",
    "--prefill-repeats", "5",
    "--decode-repeats", "3",
    "--mixing",
)  # fmt: skip
#: vLLM 0.32's per-step budget on a CPU when none is given (2,048 per socket); the server shows
#: it only with its development endpoints, so the default variant's profile is given it.
CPU_DEFAULT_BUDGET = 2048
BUDGET = 256


def say(text: str) -> None:
    """One progress line."""
    print(f"backtest: {text}", flush=True)


@contextmanager
def vllm_target(variant: str, folder: Path, model: Path) -> Iterator[Target]:
    """vLLM's server of ``variant``, running, described for the backtest."""
    venv = ensure_venv(default_venv(REPO), folder.parent / "install.log")
    if not model.is_dir():
        build_model(venv.python, model)
    extra: tuple[str, ...] = ("--max-num-seqs", str(MAX_NUM_SEQS))
    env: dict[str, str] = {}
    profile_args: tuple[str, ...] = SWEEP
    if variant == "vllm-256":
        extra = ("--max-num-batched-tokens", str(BUDGET), *extra)
        env["VLLM_SERVER_DEV_MODE"] = "1"
        about = f"vLLM 0.32 CPU server, budget {BUDGET} (from the engine), max_num_seqs 8"
    else:
        given = write_limits(
            folder, "profile-limits.json", max_num_batched_tokens=CPU_DEFAULT_BUDGET
        )
        profile_args = (*SWEEP, "--limits", str(given))
        about = f"vLLM 0.32 CPU server, budget {CPU_DEFAULT_BUDGET} (limits file), max_num_seqs 8"
    port = free_port()
    with running(variant, venv.python, model, port, folder / "server.log", extra=extra,
                 env=env) as server:  # fmt: skip
        say(f"{variant}: vLLM ready at {server.url} ({server.ready_s:.0f} s)")
        fleet = cmd.write_fleet(
            folder, server.url, iid=IID, model=SERVED_MODEL, contract=ENGINE_CONTRACT
        )
        yield Target(
            variant=variant,
            folder=folder,
            base=server.url,
            fleet=fleet,
            limits=write_limits(folder),
            profile_args=profile_args,
            shapes=SHAPES,
            about=about,
        )


def target(variant: str, work: Path) -> AbstractContextManager[Target]:
    """The running engine of ``variant``, in its folder of ``work``."""
    folder = work / variant
    folder.mkdir(mode=0o700)
    if variant == "sim":
        return backtest_target(folder)
    return vllm_target(variant, folder, work / "model")


def measure(work: Path, variants: list[str], factors: list[float], quick: bool) -> None:
    """Every variant, one after the other; ``backtest.json`` says what ran, where and when."""
    failed: dict[str, str] = {}
    meta: dict[str, Any] = {
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": machine(),
        "variants": variants,
        "factors": factors,
        "requests": REQUESTS,
        "attainment": ATTAINMENT,
        "quick": quick,
        "failed": failed,
    }
    write_json(work / "backtest.json", meta)
    started = time.monotonic()
    for variant in variants:
        try:
            with target(variant, work) as engine:
                measure_variant(engine, factors, say)
        except Exception as exc:  # e.g. a server that never started: the others still run
            failed[variant] = f"{type(exc).__name__}: {exc}"[:2000]
            say(f"{variant}: did not finish: {failed[variant]}")
    meta["ended_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    meta["wall_s"] = round(time.monotonic() - started, 1)
    meta["machine_end"] = machine()
    write_json(work / "backtest.json", meta)


def main() -> int:
    """Measure (or replay), score, print; write ``--json`` and the docs' table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated")
    parser.add_argument("--quick", action="store_true", help="the simulator alone, four rates")
    parser.add_argument("--work", type=Path, help="work folder (default: a new one)")
    parser.add_argument("--replay", type=Path, help="score a finished work folder again")
    parser.add_argument("--repredict", action="store_true", help="with --replay: predict again, "
                        "in a copy, with the predictor installed now")  # fmt: skip
    parser.add_argument("--json", type=Path, help="every figure, as JSON (also WORK/figures.json)")
    parser.add_argument("--docs", type=Path, help=f"the page to write the table into ({DOCS} "
                        "unless --quick or --no-docs)")  # fmt: skip
    parser.add_argument("--no-docs", action="store_true", help="leave the docs alone")
    args = parser.parse_args()
    variants = ["sim"] if args.quick else args.variants.split(",")
    unknown = sorted(set(variants) - set(VARIANTS))
    if unknown:
        parser.error(f"unknown variant(s) {', '.join(unknown)}; known: {', '.join(VARIANTS)}")
    if args.repredict and args.replay is None:
        parser.error("--repredict needs --replay DIR")
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    if args.replay is not None:
        work = args.replay.absolute()
        if args.repredict:
            copy = work.with_name(f"{work.name}-repredicted-{stamp}")
            shutil.copytree(work, copy, symlinks=True)
            work = copy
            say(f"predicting again in {work}")
            repredict(work, say)
    else:
        work = (args.work or REPO / ".bench-runs" / f"backtest-{stamp}").absolute()
        work.mkdir(mode=0o700, parents=True, exist_ok=False)
        say(f"work folder {work}")
        factors = list(QUICK_FACTORS if args.quick else FACTORS)
        measure(work, variants, factors, args.quick)
    figures = backtest_figures(work)
    text = markdown(figures)
    print(text)
    for path in (work / "figures.json", args.json):
        if path is not None:
            path.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    say(f"figures in {work / 'figures.json'}")
    docs = args.docs or (None if figures.get("quick") or args.no_docs else DOCS)
    if docs is not None and not args.no_docs:
        publish(docs, text)
        say(f"table written into {docs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
