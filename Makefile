# Developer entry points. `make run` starts everything locally on embedded defaults; `make test` is what CI runs.

VENV_BIN    := .venv/bin
PYTHON      := $(VENV_BIN)/python
PYTEST_ARGS ?=

.DEFAULT_GOAL := help

.PHONY: help install install-runtime system-deps run test soak lint fmt migrate bench docs-deps docs docs-serve up down

help:
	@echo "make install      install the locked dependencies, dev group included, into .venv (uv sync --frozen)"
	@echo "make install-runtime"
	@echo "                  the runtime ones only (uv sync --frozen --no-dev: the dev group is removed)"
	@echo "make system-deps  apt-install redis-server, mariadb-server, prometheus (promtool) and chromium for the tests"
	@echo "                  (no service is started)"
	@echo "make run          api + worker + dead-letter + scheduler, on SQLite and an embedded Redis"
	@echo "                  (runtime dependencies only: make install-runtime; make test puts the dev group back)"
	@echo "                  (one by one: uvicorn app.main:app, python -m workers.report_worker,"
	@echo "                   python -m workers.dead_letter, python -m workers.scheduler)"
	@echo "make test         ruff, mypy, import contracts (lint-imports), the docs' strict build (make docs), then"
	@echo "                  pytest (PYTEST_ARGS='-k foo')"
	@echo "make soak         the long checker: real processes under random faults for SOAK_MINUTES (10), then the"
	@echo "                  model's long random search (MODEL_EXAMPLES=$(MODEL_EXAMPLES)x the short one, MODEL_STEPS=$(MODEL_STEPS));"
	@echo "                  bounded, loopback only, on its own MariaDB and Redis"
	@echo "make lint         ruff check, ruff format --check, mypy, lint-imports"
	@echo "make fmt          ruff format, ruff check --fix"
	@echo "make migrate      alembic upgrade head on DATABASE_URL"
	@echo "make bench        run the benchmarks (BENCH_PHASES=scale: the figures at 0, 1M and 10M job rows;"
	@echo "                  bench/common.py lists the knobs)"
	@echo "make docs         build the manual (docs/, MkDocs) into site/, strict: any broken link or warning fails"
	@echo "make docs-serve   serve the manual on http://127.0.0.1:$(DOCS_PORT), rebuilt on every change"
	@echo "make up / down    the docker compose stack (MySQL, Redis and every process)"

# `uv sync` is exact: it installs the groups asked for and removes every other package, so `make run` then
# `make test` (or the other way round) each leave .venv with the set they need. uv is pip-installed if missing.
define uv_sync
	@command -v uv >/dev/null 2>&1 || python3 -m pip install --quiet uv
	@if command -v uv >/dev/null 2>&1; then uv sync --frozen $(1); else python3 -m uv sync --frozen $(1); fi
endef

install:
	$(call uv_sync,)

# What `make run` needs and nothing more: no test, lint or fuzz tools (pytest, ruff, mypy, moto, schemathesis …).
install-runtime:
	$(call uv_sync,--no-dev)

# The integration tests start their own redis-server and mariadbd on free ports; they only need the binaries.
# `prometheus` is installed for promtool (the tests check deploy/prometheus's config and alert rules).
# policy-rc.d (exit 101) keeps the packages' install scripts from starting the system services.
system-deps:
	@if command -v redis-server >/dev/null 2>&1 \
	    && { [ -x /usr/sbin/mariadbd ] || command -v mariadbd >/dev/null 2>&1; } \
	    && command -v mariadb-install-db >/dev/null 2>&1 \
	    && command -v promtool >/dev/null 2>&1 \
	    && command -v chromium >/dev/null 2>&1; then \
	  exit 0; \
	fi; \
	if [ "$$(id -u)" -eq 0 ]; then SUDO=; else SUDO=sudo; fi; \
	POLICY=/usr/sbin/policy-rc.d; CREATED=; \
	if [ ! -e $$POLICY ]; then \
	  printf '#!/bin/sh\nexit 101\n' | $$SUDO tee $$POLICY >/dev/null && $$SUDO chmod 755 $$POLICY && CREATED=1; \
	fi; \
	trap 'if [ -n "$$CREATED" ]; then $$SUDO rm -f $$POLICY; fi' EXIT; \
	$$SUDO apt-get update && \
	$$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends redis-server mariadb-server prometheus chromium fonts-dejavu-core

run: install-runtime
	$(PYTHON) -m devtools.run

test: system-deps install
	$(VENV_BIN)/ruff check .
	$(VENV_BIN)/mypy app workers devtools
	$(VENV_BIN)/lint-imports --no-cache
	@$(MAKE) --no-print-directory docs
	$(PYTHON) -m pytest -q --durations=30 $(PYTEST_ARGS)

# The long checker (issue 26). `make test` runs the short versions: a 1-minute soak and a seeded model search.
SOAK_MINUTES   ?= 10
SOAK_SEED      ?= 26
MODEL_EXAMPLES ?= 5
MODEL_STEPS    ?= 50

soak: system-deps install
	@status=0; \
	SOAK_MINUTES=$(SOAK_MINUTES) SOAK_SEED=$(SOAK_SEED) $(PYTHON) -m pytest -q tests/model/test_soak.py $(PYTEST_ARGS) || status=1; \
	MODEL_EXAMPLES=$(MODEL_EXAMPLES) MODEL_STEPS=$(MODEL_STEPS) $(PYTHON) -m pytest -q tests/model/test_dispatch_model.py $(PYTEST_ARGS) || status=1; \
	exit $$status

lint: install
	$(VENV_BIN)/ruff check .
	$(VENV_BIN)/ruff format --check .
	$(VENV_BIN)/mypy app workers devtools
	$(VENV_BIN)/lint-imports --no-cache

fmt: install
	$(VENV_BIN)/ruff format .
	$(VENV_BIN)/ruff check --fix .

migrate: install
	$(VENV_BIN)/alembic upgrade head

bench: system-deps install
	$(call uv_sync,--group bench)
	$(PYTHON) -m bench.run

# The manual: MkDocs + Material from the `docs` dependency group. Offline: no web fonts, no CDN (mkdocs.yml).
# The settings table, reportctl's help and the import contracts are generated at build time (docs/hooks/).
DOCS_PORT ?= 8001
export NO_MKDOCS_2_WARNING := 1

docs-deps:
	@command -v uv >/dev/null 2>&1 || python3 -m pip install --quiet uv
	@if command -v uv >/dev/null 2>&1; then uv sync --frozen --group docs; else python3 -m uv sync --frozen --group docs; fi

docs: docs-deps
	$(VENV_BIN)/mkdocs build --strict --site-dir site

docs-serve: docs-deps
	$(VENV_BIN)/mkdocs serve --dev-addr 127.0.0.1:$(DOCS_PORT)

up:
	docker compose up --build

down:
	docker compose down
