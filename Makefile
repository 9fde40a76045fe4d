# heronlike: `make demo` tunes an int8 GEMM on this CPU; `make test` runs lint and the tests.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip --disable-pip-version-check -q

.PHONY: demo test bench bench-suite clean

$(BIN)/python:
	$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "heronlike needs Python >= 3.11"'
	$(PYTHON) -m venv $(VENV)

$(VENV)/.stamp-test: $(BIN)/python setup.cfg pyproject.toml
	$(PIP) install -e ".[test]"
	touch $@

$(VENV)/.stamp-bench: $(VENV)/.stamp-test
	$(PIP) install -e ".[test,bench]"
	touch $@

# AVX512-VNNI when this CPU has it; otherwise the general rule set (vectorised int8 without VNNI)
DEMO_TARGET := $(shell grep -qw avx512_vnni /proc/cpuinfo 2>/dev/null && echo dlboost || echo "dlboost -general")

demo: $(VENV)/.stamp-bench
	$(BIN)/heronlike tune gemm --shape 1024,1024,1024 --dtype int8 --target "$(DEMO_TARGET)" --trials 64

test: $(VENV)/.stamp-test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/pytest -m "not slow and not benchmark"

bench: $(VENV)/.stamp-bench
	$(BIN)/python benchmarks/randsat_throughput.py --seconds 5

# heronlike vs MetaSchedule vs PyTorch vs numpy on the default subset of Heron's DL Boost cases
# (12-30 minutes on 2 cores); options: make bench-suite SUITE_ARGS="--cases G1 --trials 32"
bench-suite: $(VENV)/.stamp-bench
	$(BIN)/python benchmarks/suite.py $(SUITE_ARGS)

clean:
	rm -rf $(VENV) heronlike_runs build *.egg-info
