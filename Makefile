# dgl-operator developer entry points. `make test` is what CI runs (.ci/run).
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

CACHE    ?= $(HOME)/.cache/dgl-operator
PYTHON   ?= $(shell command -v python3.11 || command -v python3)
# The venv is keyed by the dependency declarations, so a change to them builds a fresh one.
VENV_KEY := $(shell cat setup.cfg pyproject.toml | sha256sum | cut -c1-12)
VENV     := $(CACHE)/venv-$(VENV_KEY)
BIN      := $(VENV)/bin
PKGS     := workqueue informers controller launcher watcher_loop kubectl_download
# Imports (and the console scripts started by tests) come from this checkout even when the
# shared cached venv's editable install points at another clone.
export PYTHONPATH := $(CURDIR)

.PHONY: help venv lint typecheck unit test bench demo clean-venvs

help:
	@echo "make demo   - set up and run the example job"
	@echo "make test   - install everything needed and run lint, type checks and all tests"
	@echo "make bench  - run the benchmarks under bench/ and print their figures"

$(VENV)/.ready: setup.cfg pyproject.toml
	@mkdir -p $(CACHE)
	@if [ ! -x $(BIN)/python ]; then $(PYTHON) -m venv $(VENV); fi
	$(BIN)/python -m pip install --quiet --upgrade "pip>=23" "setuptools>=61,<70" wheel
	$(BIN)/python -m pip install --quiet -e '.[dev]' 2>&1 | grep -v -i -E "warning|^\s*$$|!!|\*\*\*|editable|precedence|wheel_obj|^\s+return" || true
	$(BIN)/python -c "import kubernetes, prometheus_client, structlog, pytest, celpy"
	@touch $@

# The editable install is re-pointed at this checkout every time (cheap), so one cached venv
# serves any clone.
venv: $(VENV)/.ready
	@$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e . >/dev/null 2>&1

lint: venv
	$(BIN)/ruff check $(PKGS) tests bench
	$(BIN)/ruff format --check $(PKGS) tests bench

typecheck: venv
	$(BIN)/mypy $(PKGS)

unit: venv
	$(BIN)/python -m pytest -q tests

test: lint typecheck unit

bench: venv
	$(BIN)/python bench/workqueue_bench.py

demo: venv
	@echo "make demo: the data plane (dglrun + GraphSAGE) lands with issue 3; for now this"
	@echo "renders the operator's children for the example DGLJob."
	$(BIN)/python -m controller.render examples/graphsage/dgljob.yaml

clean-venvs:
	rm -rf $(CACHE)/venv-*
