# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Tests of the CPU benchmark (`benchmarks/`): the task generator, the warm-started base model, an end-to-end run."""

import json
import os
import random

import pytest

from benchmarks.toy import tasks


def reference_chain(prompt: str) -> list[str]:
    """Independent solver: parse the prompt into a Python expression tree of its own and fold it step by step."""
    words = prompt.split()
    assert words[-1] == "="
    ops = {
        "+": lambda a, b: (a + b) % 10,
        "-": lambda a, b: (a - b) % 10,
        "*": lambda a, b: (a * b) % 10,
        "max": max,
        "min": min,
    }
    values, current = [], int(words[0])
    i = 1
    while words[i] != "=":
        current = ops[words[i]](current, int(words[i + 1]))
        values.append(str(current))
        i += 2
    return values


def test_hand_checked_examples():
    assert tasks.solve("7 max 5 min 3 max 9 =") == "7 3 9"
    assert tasks.solve("7 + 5 * 3 - 9 =") == "2 6 7"
    assert tasks.solve("0 - 1 =") == "9"
    with pytest.raises(ValueError):
        tasks.solve("7 + =")


@pytest.mark.parametrize("operators", [("max", "min"), ("+", "-", "*"), tasks.OPERATORS])
def test_answers_match_independent_solver(operators):
    spec = tasks.TaskSpec(min_steps=1, max_steps=8, operators=operators)
    rng = random.Random(123)
    for _ in range(500):
        prompt = tasks.random_prompt(rng, rng.randint(spec.min_steps, spec.max_steps), spec.operators)
        assert tasks.solve(prompt).split() == reference_chain(prompt)
    for row in tasks.make_split(300, spec, seed=5):
        assert row["answer"].split() == reference_chain(row["prompt"])
        assert len(row["answer"].split()) == row["steps"] == tasks.num_steps(row["prompt"])


def test_splits_deterministic_disjoint_and_spread():
    spec = tasks.TaskSpec()
    a = tasks.make_splits(spec, seed=3, num_train=600, num_val=60, num_test=120)
    b = tasks.make_splits(spec, seed=3, num_train=600, num_val=60, num_test=120)
    c = tasks.make_splits(spec, seed=4, num_train=600, num_val=60, num_test=120)
    assert a == b
    assert a["test"] != c["test"]
    test, val = {r["prompt"] for r in a["test"]}, {r["prompt"] for r in a["val"]}
    train = {r["prompt"] for r in a["train"]}
    assert len(test) == 120 and len(val) == 60  # held-out prompts are distinct
    assert not (test & val) and not (train & (test | val))
    steps = [r["steps"] for r in a["test"]]
    assert {s: steps.count(s) for s in set(steps)} == {s: 20 for s in range(1, 7)}


def test_reward_is_exact_match():
    rewards = tasks.chain_reward(["7 3 9", "7 3", "7 3 9 9", "", " 7  3 9 "], ["7 3 9"] * 5)
    assert rewards == [1.0, 0.0, 0.0, 0.0, 1.0]


def test_chain_is_a_registered_task_with_its_verifier():
    """The benchmark's rows are rows of the `chain` task of `trl_srppo.tasks.registry`: its prompt, its row checks (a
    wrong gold answer is refused), its verifier `chain` and the one threshold of "correct"."""
    from trl_srppo.rewards import get_reward_func
    from trl_srppo.tasks.registry import MalformedRow, get_task, is_correct

    chain = get_task("chain")
    assert get_reward_func(chain.reward) is tasks.chain_reward
    for row in tasks.make_split(30, tasks.TaskSpec(), seed=3):
        prepared = chain.prepare({"chain": row["prompt"], "answer": row["answer"]})
        assert chain.render(prepared) == row["prompt"] and prepared["answer"] == row["answer"]
        rewards = chain.score([row["prompt"]] * 2, [row["answer"], row["answer"] + " 0"], [prepared] * 2)
        assert [is_correct(r) for r in rewards] == [True, False]
    with pytest.raises(MalformedRow, match="running values '7 3'"):
        chain.prepare({"chain": "7 max 5 min 3 =", "answer": "7 5"})
    with pytest.raises(MalformedRow, match="not a chain prompt"):
        chain.prepare({"chain": "7 max x =", "answer": "7"})
    conversation = [{"role": "assistant", "content": "7 3"}]
    assert tasks.chain_reward([conversation], ["7 3"]) == [1.0]


def test_grid_reuses_a_cached_run_only_when_its_whole_spec_matches(tmp_path):
    # The run name leaves the critic's learning rate out: a run cached with another one must be trained again.
    from dataclasses import asdict, replace

    from benchmarks.toy.grid import VARIANTS, Grid, run_spec

    variant = VARIANTS["smoke"]
    grid = Grid(variant, base_path="unused", cache_dir=str(tmp_path), workers=1)
    spec = run_spec(variant, "sr-ppo", "off", 1e-3, seed=0)
    other = replace(spec, critic_learning_rate=9e-4)
    assert other.name == spec.name
    path = os.path.join(grid.run_dir, f"{spec.name}.json")
    with open(path, "w") as f:
        json.dump({"name": spec.name, "spec": asdict(other)}, f)
    assert [job["spec"] for job in grid._jobs([spec])] == [asdict(spec)]
    assert grid.reused == 0
    with open(path, "w") as f:
        json.dump({"name": spec.name, "spec": asdict(spec)}, f)
    assert grid._jobs([spec]) == [] and grid.reused == 1
    assert grid.results[spec.name]["spec"]["options"] == []
