# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The CPU toy family (`trl_srppo.tasks.toy`): its rows, tokenizer and model are the ones the benchmark's cached base
model and results were built from, and `python -m trl_srppo.tasks.toy` writes files the `chain` task and the CPU recipe
read."""

import hashlib
import json
import random
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from trl_srppo.tasks.registry import get_task
from trl_srppo.tasks.toy import (
    OPERATORS,
    TOY_SPEC,
    TaskSpec,
    build_model,
    build_tokenizer,
    make_split,
    make_splits,
    random_prompt,
)

ROOT = Path(__file__).resolve().parents[1]


def digest(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:16]


def test_rows_are_those_the_benchmark_was_built_from():
    # Hard-coded from the generator before it moved into the package (`benchmarks/tasks.py` at the time), with this
    # same `digest` of the same calls; the benchmark's cached base model and its results were built from these rows.
    rng = random.Random(1)
    assert digest([random_prompt(rng, s % 5 + 1) for s in range(50)]) == "149e8143d998f04e"
    assert digest(make_split(300, TaskSpec(), seed=5)) == "c8252d03ac44e9ff"
    assert digest(make_split(300, TaskSpec(1, 8, OPERATORS), seed=7, distinct=False)) == "665c64792ea66d3f"
    splits = make_splits(TaskSpec(), seed=0, num_train=600, num_val=60, num_test=120)
    assert digest(splits) == "aabda251e638edcf"


def test_tokenizer_ids_and_initial_weights_are_the_benchmarks():
    tokenizer = build_tokenizer()
    words = ["<pad>", "<eos>", *"0123456789", "+", "-", "*", "max", "min", "="]
    assert sorted(tokenizer.get_vocab(), key=tokenizer.get_vocab().get) == words  # the ids the base model learned
    assert tokenizer("7 max 5 =")["input_ids"] == [9, 15, 7, 17]
    assert tokenizer.padding_side == "left" and tokenizer.pad_token_id == 0 and tokenizer.eos_token_id == 1
    # A conversation renders as its bare text (the model has no roles), so training and evaluation prompts agree.
    messages = [{"role": "user", "content": "7 max 5 ="}]
    assert tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True) == "7 max 5 ="
    # Hard-coded from the benchmark's untrained model before the move (`build_untrained_model(build_tokenizer(),
    # WarmStartSpec())` of `benchmarks/toy/base_model.py`: seed 0, hidden 32, 2 layers), this digest of its weights.
    state = build_model(tokenizer, seed=0, hidden_size=32, num_layers=2).state_dict()
    weights = hashlib.sha256(b"".join(v.numpy().tobytes() for v in state.values())).hexdigest()[:16]
    assert weights == "f605d1d58e1ab2c6"


def test_task_spec_refuses_shapes_that_draw_no_chain():
    with pytest.raises(ValueError, match="min_steps <= max_steps"):
        TaskSpec(min_steps=3, max_steps=2)
    with pytest.raises(ValueError, match="operators must be a non-empty subset"):
        TaskSpec(operators=("max", "pow"))
    assert TOY_SPEC.max_completion_tokens == 3  # two values and <eos>


def test_command_writes_the_chain_task_files_the_cpu_recipe_reads(tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    command = [sys.executable, "-m", "trl_srppo.tasks.toy", "outputs/toy", "--num_prompts", "40"]
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = [json.loads(line) for line in (tmp_path / "outputs/toy/train.jsonl").read_text().splitlines()]
    assert len(rows) == 40 and all(set(row) == {"chain", "answer"} for row in rows)
    chain = get_task("chain")
    for row in rows:  # the task's own row check: a valid chain and its running values
        assert chain.prepare(row) == row
        assert TOY_SPEC.min_steps <= len(row["answer"].split()) <= TOY_SPEC.max_steps
    assert {len(row["answer"].split()) for row in rows} == {1, 2}

    model_dir = tmp_path / "outputs/toy/model"
    assert (model_dir / "model.safetensors").is_file()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)  # the loader of a Hub model
    assert tokenizer.get_vocab() == build_tokenizer().get_vocab() and tokenizer.padding_side == "left"
    rendered = tokenizer.apply_chat_template([{"role": "user", "content": rows[0]["chain"]}], tokenize=False)
    assert rendered == rows[0]["chain"]
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    assert model.config.vocab_size == len(tokenizer) == 18

    recipe = yaml.safe_load((ROOT / "recipes" / "cpu" / "srppo_toy.yaml").read_text())
    assert recipe["task"] == "chain"
    assert recipe["max_completion_length"] == TOY_SPEC.max_completion_tokens  # the longest answer and <eos>
