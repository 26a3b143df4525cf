# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The `number` reward and the `arithmetic` task: hand-computed reads of plain-text answers."""

import pytest

from trl_srppo.rewards import REWARD_FUNCS, get_reward_func, unreadable
from trl_srppo.rewards.number import extract_answer, number_reward, parse_number
from trl_srppo.tasks.registry import MalformedRow, get_task


@pytest.mark.parametrize(
    "text, expected",
    [
        ("7 + 5 = 12.", "12"),
        ("The answer is 12, which is even.", "12"),
        ("7 + 5 = 12. Then 3 more apples and 40 pears.", "12"),
        ("46 + 4 equals 50, an exclusive bonus.", "50"),
        ("5 - 9 = -4", "-4"),
        ("5 - 9 = \u22124", "-4"),
        ("The total is 1,234 dollars", "1,234"),
        ("It is **16**.", "16"),
        ("Answer: 2.5", "2.5"),
        ("9+8 = 17 lattice =", "17"),
        ("I counted 3 then 8", "8"),
        ("in base-7 we write 15", "15"),
        ("Two + six equals eight.", None),
        ("", None),
    ],
)
def test_extract_answer_reads_the_number_the_model_writes(text, expected):
    assert extract_answer(text) == expected


@pytest.mark.parametrize(
    "text, value",
    [("12", 12), ("-3", -3), ("1,234", 1234), ("12.50", 12.5), ("1,234,567", 1234567)],
)
def test_parse_number(text, value):
    assert parse_number(text) == pytest.approx(value)


@pytest.mark.parametrize("text", ["12.", "1,23", "abc", "1 2", "--3", ""])
def test_parse_number_refuses_what_is_not_one_number(text):
    assert parse_number(text) is None


def test_number_reward_scores_against_the_gold_answer():
    completions = [
        "7 + 5 = 12.",
        "7 + 5 = 13, not 12",
        "The answer is 12.0",
        [{"role": "assistant", "content": "It is 1,000."}],
        "twelve",
        "5 - 9 = -4",
        "anything",
    ]
    gold = ["12", "12", 12, "1000", "12", "-4", "not a number"]
    assert number_reward(prompts=[""] * 7, completions=completions, answer=gold) == [
        1.0,
        0.0,
        1.0,
        1.0,
        0.0,
        1.0,
        None,
    ]


def test_number_is_registered_with_its_reading_step():
    func = get_reward_func("number")
    assert func is REWARD_FUNCS["number"] is number_reward
    assert "last" in func.answer_format
    assert unreadable(func, ["7 + 5 = 12.", "seven"], answer=["12", "12"]) == [False, True]


def test_arithmetic_task_renders_checks_and_scores():
    task = get_task("arithmetic")
    prepared = task.prepare({"problem": "What is 7 + 5?", "answer": 12})
    assert prepared == {"problem": "What is 7 + 5?", "answer": "12"}
    assert task.render(prepared) == "What is 7 + 5?"
    assert task.score(["p", "p"], ["7 + 5 = 12.", "It is 11"], [prepared, prepared]) == [1.0, 0.0]
    with pytest.raises(MalformedRow, match="must be a number"):
        task.prepare({"problem": "What is 7 + 5?", "answer": "twelve"})


def test_arithmetic_task_builds_training_prompts():
    from datasets import Dataset

    from trl_srppo.tasks.data import build_prompts

    rows = [{"problem": "What is 7 + 5?", "answer": "12"}, {"problem": "What is 2 - 3?", "answer": "minus one"}]
    prompts, bad = build_prompts(Dataset.from_list(rows), get_task("arithmetic"))
    assert prompts.to_list() == [{"prompt": [{"role": "user", "content": "What is 7 + 5?"}], "answer": "12"}]
    assert len(bad) == 1
