# Every target creates or reuses .venv and installs what it needs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
export TF_CPP_MIN_LOG_LEVEL ?= 2
# Test processes (pytest-xdist): the suite waits on subprocesses and servers much of the time,
# so two processes finish it sooner even on 2 cores; each file stays in one process, so its
# module fixtures (a demo run, killed training runs) are made once.
TEST_WORKERS ?= 2

.PHONY: demo test bench lint docs clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -e ".[dev]"
	touch $@ $(VENV)/.installed

# The benchmarks' peers (Grain, ArrayRecord, NVIDIA DALI): only `make bench` installs them.
$(VENV)/.installed-bench: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -e ".[dev,bench]"
	touch $@ $(VENV)/.installed-dev $(VENV)/.installed

demo: $(VENV)/.installed
	$(BIN)/tfpipe demo --workdir demo-data

test: $(VENV)/.installed-dev
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile

bench: $(VENV)/.installed-bench
	$(BIN)/python -m benchmarks
	$(BIN)/python -m benchmarks.tables

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check src tests benchmarks examples
	$(BIN)/ruff format --check src tests benchmarks examples
	$(BIN)/mypy

docs: $(VENV)/.installed-dev
	$(BIN)/mkdocs build --strict

clean:
	rm -rf $(VENV) demo-data build site *.egg-info src/*.egg-info
