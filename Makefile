# Every target creates or reuses .venv and installs what it needs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Test processes (pytest-xdist): the suite waits on subprocesses and servers much of the time
# (two processes kept 1.16 of 2 cores busy), so more finish it sooner even on 2 cores: three
# took 875 -> 588 s (2026-11-27), four 422 -> 384 s (1.67 -> 1.75 cores busy, 2026-11-28);
# each file stays in one process, so its module fixtures (a demo run, killed training runs)
# are made once, and tests/conftest.py hands out the longest files first.
TEST_WORKERS ?= 4

# The quick check's tests: the files of the flow's core (schema, sources, writer, the command,
# the public API) without those marked slow; seconds each. `make test` runs every file.
QUICK_TESTS ?= tests/test_schema.py tests/sources/test_sources.py tests/records/test_writer.py \
	tests/cli/test_cli.py tests/project/test_public_api.py

.PHONY: demo check test bench lint docs clean bytecode

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# uv installs the versions pip resolves (the same 166 packages for .[dev], 2026-11-27) in half
# the time: .[dev] into a new .venv took 86 s with an empty uv cache against pip's 172 s here,
# most of CI's set-up. It comes from the package index like the rest. --compile-bytecode: pip
# writes the .pyc files at install, uv only when asked, and with PYTHONDONTWRITEBYTECODE=1 (set
# on these machines) every process then compiled TensorFlow again (13.7 s of CPU per import
# against 6.7 s; the suite took 794 s instead of ~600 s).
INSTALL := $(BIN)/uv pip install --compile-bytecode --python $(BIN)/python

# PyTorch (in .[dev], for the KERAS_BACKEND=torch tests): PyPI's default Linux wheel is a
# CUDA build, ~3 GB downloaded with its nvidia-* wheels. A CPU build in pip's find-links folder
# (PIP_FIND_LINKS: /opt/wheels on these machines and in CI, torch 2.13.0+cpu, 183 MB) is taken
# instead, given as a requirement beside .[dev] since uv does not read pip's settings; uv then
# resolves torch's own dependencies from the index. Without one, PyPI's torch is installed.
PY_TAG := $(shell $(PYTHON) -c 'import sys; print("cp%d%d" % sys.version_info[:2])')
TORCH_WHEEL := $(lastword $(sort $(foreach links,$(PIP_FIND_LINKS),\
	$(wildcard $(links)/torch-*+cpu-$(PY_TAG)-$(PY_TAG)-*linux*_$(shell uname -m).whl))))

$(BIN)/uv: | $(BIN)/python
	$(BIN)/pip install -q uv

$(VENV)/.installed: pyproject.toml setup.py | $(BIN)/uv
	$(INSTALL) -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml setup.py | $(BIN)/uv
	$(INSTALL) -e ".[dev]" $(TORCH_WHEEL)
	touch $@ $(VENV)/.installed

# The benchmarks' peers (Grain, ArrayRecord, NVIDIA DALI): only `make bench` installs them.
$(VENV)/.installed-bench: pyproject.toml setup.py | $(BIN)/uv
	$(INSTALL) -e ".[dev,bench]" $(TORCH_WHEEL)
	touch $@ $(VENV)/.installed-dev $(VENV)/.installed

# The editable install leaves tfpipe's own modules without .pyc files, and with
# PYTHONDONTWRITEBYTECODE=1 every process compiled them again: importing tfpipe with its
# loaders, writer and fit took 5.7-6.3 s against 4.7-5.0 s compiled (test subprocesses, Beam
# and Spark workers, each benchmark case). A module edited since is compiled in memory again.
bytecode: $(VENV)/.installed
	$(BIN)/python -m compileall -q src/tfpipe

demo: $(VENV)/.installed bytecode
	$(BIN)/tfpipe demo --workdir demo-data

# A minute or two: lint, types and the quick tests; `make test` is the whole suite CI runs.
check: lint bytecode
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile -m "not slow" $(QUICK_TESTS)

test: lint bytecode
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile

bench: $(VENV)/.installed-bench bytecode
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
