# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The warm-started base model of the benchmark starts neither at 0 nor at 1: its prompts span the difficulty bins."""

import os

import torch

from benchmarks.common.runs import torch_threads
from benchmarks.toy.base_model import WarmStartSpec, load_or_build_base_model
from benchmarks.toy.scoring import evaluate
from benchmarks.toy.tasks import TaskSpec, make_splits


def test_warm_start_spans_the_difficulty_bins(tmp_path):
    # The benchmark's own build code and settings, on fewer held-out prompts; the seed is fixed, so the outcome is.
    # One thread, as the benchmark runs it (a second thread on a busy shared core slows this test 50-fold).
    with torch_threads(1):
        check_warm_start(tmp_path)


def check_warm_start(tmp_path):
    task, spec = TaskSpec(), WarmStartSpec()
    splits = make_splits(task, seed=0, num_train=10, num_val=12, num_test=120)
    held_out = [r["prompt"] for r in splits["val"] + splits["test"]]
    path, model, tokenizer = load_or_build_base_model(task, spec, held_out, cache_dir=str(tmp_path), log=lambda _: 0)
    assert os.path.isfile(os.path.join(path, "model.safetensors"))

    result = evaluate(model, tokenizer, splits["test"], 8, seed=0, max_new_tokens=task.max_completion_tokens)
    # Each bin holds at least 10% of the prompts (measured on this seed: 28% easy, 25% medium, 47% hard).
    for name in ("easy", "medium", "hard"):
        assert result["bins"][name] >= 0.10, result["bins"]
    assert 0.1 < result["pass@1"] < 0.7
    # Difficulty follows the number of steps: the shortest chains succeed far more often than the longest.
    by_steps = result["success_by_steps"]
    assert by_steps["1"] > by_steps["6"] + 0.3, by_steps

    # The second call loads the cached model instead of building it again.
    path_again, cached, _ = load_or_build_base_model(task, spec, held_out, cache_dir=str(tmp_path), log=print)
    assert path_again == path
    for a, b in zip(model.state_dict().values(), cached.state_dict().values()):
        assert torch.equal(a, b)
