# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Tests of the reward registry and of the countdown, knights-and-knaves and multiple-choice rewards.

The math reward is tested in ``test_rewards_math.py`` and the worker pool in ``test_rewards_timeout.py``.
"""

from __future__ import annotations

import re
import sys
import time
from fractions import Fraction
from itertools import permutations

import pytest
from helpers import read_rows

import trl_srppo.rewards as rewards
from trl_srppo.rewards import (
    REWARD_FUNCS,
    countdown_reward,
    get_reward_func,
    get_reward_funcs,
    knights_knaves_reward,
    multiple_choice_reward,
    register_reward,
)
from trl_srppo.rewards._text import answer_tag
from trl_srppo.rewards.countdown import evaluate_expression, extract_expression
from trl_srppo.rewards.knights_knaves import parse_roles


def trl_kwargs(n: int) -> dict:
    """The extra keyword arguments TRL's GRPOTrainer passes to every reward function."""
    return {
        "completion_ids": [[1, 2, 3]] * n,
        "trainer_state": object(),
        "log_extra": lambda column, values: None,
        "log_metric": lambda name, value: None,
    }


# --- registry ----------------------------------------------------------------------------------------------------


def test_registered_names_and_function_names():
    assert set(REWARD_FUNCS) == {"math", "countdown", "knights_knaves", "multiple_choice", "chain", "number"}
    for name, func in REWARD_FUNCS.items():
        assert func.__name__ == name
        assert get_reward_func(name) is func
        assert getattr(sys.modules[func.__module__], func.__qualname__) is func  # importable by reference
    assert get_reward_func("countdown") is countdown_reward
    assert get_reward_funcs("countdown, multiple_choice") == [countdown_reward, multiple_choice_reward]


def test_get_reward_func_by_dotted_path():
    assert get_reward_func("trl_srppo.rewards.countdown:countdown_reward") is countdown_reward
    assert get_reward_func("trl_srppo.rewards.countdown.countdown_reward") is countdown_reward
    assert get_reward_func("trl_srppo.rewards.knights_knaves:knights_knaves_reward") is knights_knaves_reward
    with pytest.raises(ValueError, match="cannot import"):
        get_reward_func("trl_srppo.rewards.countdown:no_such_function")
    with pytest.raises(ValueError, match="cannot import"):
        get_reward_func("no_such_package.module:function")
    with pytest.raises(ValueError, match="not callable"):
        get_reward_func("trl_srppo.rewards.countdown:MAX_DEPTH")


def test_unknown_name_lists_registered_names():
    with pytest.raises(ValueError) as info:
        get_reward_func("accuracy")
    for name in REWARD_FUNCS:
        assert name in str(info.value)
    with pytest.raises(ValueError):
        get_reward_func("")


def test_registry_refuses_duplicates_and_is_read_only():
    with pytest.raises(ValueError, match="already registered"):
        register_reward("math")(lambda prompts, completions, **kwargs: [])
    with pytest.raises(TypeError):
        REWARD_FUNCS["mine"] = countdown_reward
    with pytest.raises(ValueError):
        register_reward("not a name")


def test_missing_column_is_a_clear_error():
    with pytest.raises(ValueError, match="nums"):
        countdown_reward(None, ["1+2"], target=[3])
    with pytest.raises(ValueError, match="one per completion"):
        countdown_reward(None, ["1+2", "1+2"], nums=[[1, 2]], target=[3, 3])


# --- countdown ---------------------------------------------------------------------------------------------------


def solve(nums: list[int], target: int) -> str | None:
    """Brute force: combine any two values with + - * / until one value is left; return an expression or None."""

    def search(items: list[tuple[Fraction, str]]) -> str | None:
        if len(items) == 1:
            return items[0][1] if items[0][0] == target else None
        for i, j in permutations(range(len(items)), 2):
            (a, ea), (b, eb) = items[i], items[j]
            rest = [items[k] for k in range(len(items)) if k not in (i, j)]
            options = [(a + b, f"({ea} + {eb})"), (a - b, f"({ea} - {eb})"), (a * b, f"({ea} * {eb})")]
            if b != 0:
                options.append((a / b, f"({ea} / {eb})"))
            for value, expression in options:
                found = search(rest + [(value, expression)])
                if found:
                    return found
        return None

    return search([(Fraction(n), str(n)) for n in nums])


@pytest.fixture(scope="module")
def countdown_solved(problem_sets):
    rows = read_rows(problem_sets / "countdown_test.jsonl")
    sample = [r for r in rows if len(r["nums"]) == 3][:60] + [r for r in rows if len(r["nums"]) == 4][:40]
    solved = [(row, solve(row["nums"], row["target"])) for row in sample]
    assert sum(expression is not None for _, expression in solved) >= 0.95 * len(sample)
    return [(row, expression) for row, expression in solved if expression is not None]


def test_countdown_brute_force_solutions_score_one(countdown_solved):
    styles = [
        lambda e, t: f"<think>Trying combinations.</think>\n<answer>{e}</answer>",
        lambda e, t: f"<think>...</think> <answer> {e} = {t} </answer>",
        lambda e, t: f"So the final expression is $\\boxed{{{e} = {t}}}$.",
        lambda e, t: f"Let me check.\nThe equation is {e} = {t}.\nDone, that works",
        lambda e, t: [{"role": "assistant", "content": f"<answer>{e.replace('*', '×')}</answer>"}],
    ]
    completions, nums, targets = [], [], []
    for k, (row, expression) in enumerate(countdown_solved):
        completions.append(styles[k % len(styles)](expression, row["target"]))
        nums.append(row["nums"])
        targets.append(row["target"])
    n = len(completions)
    assert countdown_reward(None, completions, nums=nums, target=targets, **trl_kwargs(n)) == [1.0] * n


def test_countdown_wrong_expressions_score_zero(countdown_solved):
    completions, nums, targets = [], [], []
    for row, expression in countdown_solved:
        if row["nums"][0] == row["nums"][1]:
            continue
        first, second = row["nums"][0], row["nums"][1]
        twice = re.sub(rf"\b{second}\b", str(first), expression, count=1)
        wrong = [
            f"<answer>{expression}</answer>",  # scored against target + 1 below
            f"<answer>{expression} + {first} - {first}</answer>",  # reuses a number
            f"<answer>{twice}</answer>",  # the first number twice, the second not at all
            f"<answer>{' + '.join(str(n) for n in row['nums'][1:])}</answer>",  # skips a number
        ]
        for k, completion in enumerate(wrong):
            completions.append(completion)
            nums.append(row["nums"])
            targets.append(row["target"] + 1 if k == 0 else row["target"])
    scores = countdown_reward(None, completions, nums=nums, target=targets)
    assert scores == [0.0] * len(completions)


@pytest.mark.parametrize(
    "completion",
    [
        "<answer>7 / (4 - 4)</answer>",  # division by zero
        "<answer>-4 + 4 + 7</answer>",  # unary minus
        "<answer>4(4 + 7)</answer>",  # implicit multiplication
        "<answer>4.0 + 4 + 7</answer>",  # decimals
        "<answer>4 + 4 + 7 + </answer>",  # bad syntax
        "<answer>((4 + 4) + 7</answer>",  # unbalanced
        "<answer>4 ** 4 + 7</answer>",  # no power operator
        "<answer>__import__('os').system('true') or 15</answer>",  # never evaluated
        "no answer here at all",
        "",
    ],
)
def test_countdown_invalid_expressions(completion):
    assert countdown_reward(None, [completion], nums=[[4, 4, 7]], target=[15]) == [0.0]


def test_countdown_expression_parser():
    assert evaluate_expression("(96 - 74) + 37 - 7") == (Fraction(52), [96, 74, 37, 7])
    assert evaluate_expression("1 / 3 * 3") == (Fraction(1), [1, 3, 3])
    assert evaluate_expression("8 / (3 - 8 / 3)") == (Fraction(24), [8, 3, 8, 3])
    assert evaluate_expression("2 - 3 - 4")[0] == -5  # left associative
    assert evaluate_expression("2 / (1 - 1)") is None
    assert extract_expression("<answer>\\left(3 \\times 8\\right) \\div 1 = 24</answer>") == "(3 * 8) / 1"
    assert extract_expression("24 = 3 * 8") == "3 * 8"
    assert countdown_reward(None, ["<answer>8 / (3 - 8 / 3)</answer>"], nums=[[3, 3, 8, 8]], target=[24]) == [1.0]


def test_countdown_adversarial_inputs_are_fast():
    huge = [
        "(" * 100_000,
        "<answer>" + "(" * 100_000 + "1" + ")" * 100_000 + "</answer>",
        "<answer>" + "1+" * 50_000 + "1</answer>",
        "<answer>" + "9" * 100_000 + "</answer>",
        "\\boxed{" + "(" * 100_000,
        "The equation is " + "1 + " * 50_000 + "2",
        "x" * 100_000,
        "<answer>" + "(" * 40 + "1" + ")" * 40 + "</answer>",  # within the depth limit, but wrong numbers
    ]
    start = time.monotonic()
    scores = countdown_reward(None, huge, nums=[[1, 2]] * len(huge), target=[3] * len(huge))
    assert scores == [0.0] * len(huge)
    assert time.monotonic() - start < 2.0


def test_countdown_malformed_gold_gives_none():
    scores = countdown_reward(
        None, ["<answer>1+2</answer>"] * 4, nums=[None, [], [1, "x"], [1, 2]], target=[3, 3, 3, "3"]
    )
    assert scores == [None, None, None, None]


# --- knights and knaves ------------------------------------------------------------------------------------------


def describe(names: list[str], solution: list[bool], style: int) -> str:
    role = {True: "knight", False: "knave"}
    if style == 0:
        return "\n".join(f"({k + 1}) {n} is a {role[s]}" for k, (n, s) in enumerate(zip(names, solution)))
    if style == 1:
        return "\n".join(f"- **{n}**: {role[s].capitalize()}" for n, s in zip(names, solution))
    if style == 2:
        knights = [n for n, s in zip(names, solution) if s] or ["nobody"]
        knaves = [n for n, s in zip(names, solution) if not s] or ["nobody"]
        return f"Knights: {', '.join(knights)}. Knaves: {', '.join(knaves)}."
    return ", ".join(f"{n} is {'not ' if not s else ''}a knight" for n, s in zip(names, solution)) + "."


def test_knights_knaves_real_solution_text_scores_one(problem_sets):
    rows = read_rows(problem_sets / "knights_knaves_test.jsonl")
    completions = [f"<think>Checking each case.</think>\n<answer>\n{row['solution_text']}\n</answer>" for row in rows]
    scores = knights_knaves_reward(
        None,
        completions,
        solution=[row["solution"] for row in rows],
        names=[row["names"] for row in rows],
        **trl_kwargs(len(rows)),
    )
    assert scores == [1.0] * len(rows)


def test_knights_knaves_built_answers_score_one_and_flips_score_zero(problem_sets):
    rows = read_rows(problem_sets / "knights_knaves_test.jsonl")[::5]
    completions, solutions, names, expected = [], [], [], []
    for k, row in enumerate(rows):
        text = describe(row["names"], row["solution"], k % 4)
        flipped = list(row["solution"])
        flipped[k % len(flipped)] = not flipped[k % len(flipped)]
        wrong = describe(row["names"], flipped, (k + 1) % 4)
        missing = describe(row["names"][:-1], row["solution"][:-1], k % 4)
        prefix = "If Alice were a knight, the statements would clash.\n"
        for completion, score in [
            (f"{prefix}CONCLUSION: {text}", 1.0),
            (f"<answer>{text}</answer>", 1.0),
            ([{"role": "assistant", "content": f"So the answer is:\n{text}"}], 1.0),
            (f"<answer>{wrong}</answer>", 0.0),
            (f"{prefix}Final answer: {wrong}", 0.0),
            (f"<answer>{missing}</answer>", 0.0),
        ]:
            completions.append(completion)
            solutions.append(row["solution"])
            names.append(row["names"])
            expected.append(score)
    assert knights_knaves_reward(None, completions, solution=solutions, names=names) == expected


def test_knights_knaves_answer_part_wins_over_reasoning():
    names, solution = ["Zoey", "Jack", "Jackson"], [False, True, True]
    reasoning = "Suppose Zoey is a knight. Then Jack is a knave, a contradiction. "
    final = "The knights are Jack and Jackson, and the knave is Zoey."
    scores = knights_knaves_reward(
        None,
        [f"<think>{reasoning}</think><answer>{final}</answer>", f"{reasoning}\nCONCLUSION:\n{final}", reasoning],
        solution=[solution] * 3,
        names=[names] * 3,
    )
    assert scores == [1.0, 1.0, 0.0]
    assert parse_roles("Jackson is a knave but Jack is a knight", names) == {"Jackson": False, "Jack": True}


def test_knights_knaves_long_whitespace_runs():
    # Degenerate output: a long run of spaces after a role word that starts no list ("Knaves" + spaces +
    # "everywhere"), and after a name in a "Knights: ..." list. The regexes read each run once; a pattern that could
    # split it between two adjacent \s* took time quadratic in the run, in one C call a reward deadline cannot stop.
    spaces = " " * 50_000
    after_role = f"<answer>Alice is a knight and Bob is a knave. Knaves{spaces}everywhere.</answer>"
    after_listed_name = f"<answer>Knights: Alice{spaces}x. Bob is a knave.</answer>"
    completions = [after_role, after_role, after_listed_name, after_listed_name, "knight" + spaces + "x"]
    solutions = [[True, False], [False, False], [True, False], [False, False], [True, False]]
    scores = knights_knaves_reward(None, completions, solution=solutions, names=[["Alice", "Bob"]] * 5)
    assert scores == [1.0, 0.0, 1.0, 0.0, 0.0]
    assert parse_roles(f"Knights: Alice{spaces}x", ["Alice", "Bob"]) == {"Alice": True}


def test_knights_knaves_malformed_gold_gives_none():
    text = "<answer>(1) Alice is a knight</answer>"
    scores = knights_knaves_reward(
        None,
        [text] * 5,
        solution=[None, [True, False], [True], ["yes"], [True]],
        names=[["Alice"], ["Alice"], None, ["Alice"], ["Alice"]],
    )
    assert scores == [None, None, None, None, 1.0]


# --- multiple choice ---------------------------------------------------------------------------------------------


def test_multiple_choice_formats():
    cases = [
        ("The answer is \\boxed{C}.", "C", 1.0),
        ("So $\\boxed{\\text{(C)}}$", "C", 1.0),
        ("Answer: C", "C", 1.0),
        ("**Answer:** (C)", "C", 1.0),
        ("The correct answer is (B) because ...", "C", 0.0),
        ("A careful look shows option (C) fits.", "C", 1.0),
        ("Between B and C, I pick C", "C", 1.0),
        ("The answer is \\boxed{D}", "C", 0.0),
        ("No idea.", "C", 0.0),
        ("Answer: E", "(E)", 1.0),
        ("Answer: E", "C", 0.0),  # E is not an option when the gold is C
    ]
    scores = multiple_choice_reward(None, [c for c, _, _ in cases], answer=[a for _, a, _ in cases])
    assert scores == [s for _, _, s in cases]


def test_multiple_choice_long_whitespace_runs():
    # Degenerate output: "answer" followed by a long run of spaces or newlines and no option letter. Each run is read
    # once; the pattern used to try every split of it between several \s* (cubic in its length).
    newlines, spaces = "\n" * 20_000, " " * 20_000
    cases = [
        ("The answer is:" + newlines + "1", "B", 0.0),
        ("Answer: B. The answer is:" + newlines, "B", 1.0),  # the earlier phrase still counts
        ("**Answer:**" + spaces + "?", "A", 0.0),  # "Answer" is no standalone "A"
        ("The answer is option" + spaces + "unclear. I pick (C)", "C", 1.0),
        ("The answer is: (" + spaces + "C", "C", 1.0),
        ("Answer: C", "C" + spaces + "?", None),  # a malformed gold letter
        ("Answer: C", "(C" + spaces + ").", 1.0),
    ]
    scores = multiple_choice_reward(None, [c for c, _, _ in cases], answer=[a for _, a, _ in cases])
    assert scores == [s for _, _, s in cases]


def test_multiple_choice_malformed_gold_gives_none():
    assert multiple_choice_reward(None, ["Answer: C"] * 3, answer=[None, "CD", ""]) == [None, None, None]


# --- answer tags -------------------------------------------------------------------------------------------------


def test_answer_tag_after_characters_whose_lower_case_is_longer():
    # "İ".lower() is two characters: the tag is found in the text itself, not at an index into its lower case.
    assert answer_tag("İstanbul. <answer>3 * 5</answer>") == "3 * 5"
    assert answer_tag("İİ <ANSWER>1</ANSWER> then <Answer>2") == "2"  # the last tag, unclosed, runs to the end
    assert answer_tag("İ no tag") is None
    remark = "İ <answer>3 * 5</answer>\nCheck: 3 + 5 would give 8."  # without the tag, the last line's 3 + 5 counts
    assert countdown_reward(None, [remark], nums=[[3, 5]], target=[15]) == [1.0]
    kk = "İ <answer>Alice is a knight, Bob is a knave.</answer>\nIf Alice were a knave, Bob would be a knight."
    assert knights_knaves_reward(None, [kk], solution=[[True, False]], names=[["Alice", "Bob"]]) == [1.0]


def test_package_exports():
    assert rewards.math.timeout_count() >= 0
    assert callable(rewards.math_reward) and rewards.math_reward.__name__ == "math"


# --- unreadable answers ------------------------------------------------------------------------------------------

# name -> (columns of one example, a readable wrong answer, completions holding no answer the verifier can read)
READING_CASES = {
    "math": ({"answer": "7"}, "So the result is \\boxed{8}.", ["The result is 7.", "\\boxed{}", "\\boxed{7"]),
    "countdown": (
        {"nums": [2, 6, 6], "target": 24},
        "<answer>6 + 6 + 2</answer>",
        ["I could not find it.", "The target is 24"],
    ),
    "knights_knaves": (
        {"solution": [True, False], "names": ["Alice", "Bob"]},
        "<answer>Alice is a knave, Bob is a knave</answer>",
        ["Let me think about who lies.", "<answer>Carol is a knight</answer>"],
    ),
    "multiple_choice": ({"answer": "C"}, "The answer is B", ["I am not sure.", "the answer is e"]),
    "chain": ({"answer": "7 3 9"}, "7 3 8", ["seven three nine", "7 + 3", ""]),
}


@pytest.mark.parametrize("name", sorted(READING_CASES))
def test_each_verifier_tells_an_unreadable_answer_from_a_wrong_one(name):
    func = REWARD_FUNCS[name]
    columns, wrong, unreadable_texts = READING_CASES[name]
    assert isinstance(func.answer_format, str) and func.answer_format
    completions = [wrong, *unreadable_texts]
    batch = {key: [value] * len(completions) for key, value in columns.items()}
    scores = func(prompts=[""] * len(completions), completions=completions, **batch, **trl_kwargs(len(completions)))
    assert scores == [0.0] * len(completions)  # the wrong answer and the unreadable ones all score 0
    assert rewards.unreadable(func, completions, **batch, **trl_kwargs(len(completions))) == [
        False,
        *[True] * len(unreadable_texts),
    ]
    assert func.extract_answer(wrong, **columns) is not None


def test_unreadable_reads_conversational_completions_and_wrapped_functions():
    import functools

    @functools.wraps(rewards.math_reward)
    def wrapped(**kwargs):
        return rewards.math_reward(**kwargs)

    messages = [[{"role": "assistant", "content": "\\boxed{3}"}], [{"role": "assistant", "content": "3"}]]
    assert rewards.unreadable(wrapped, messages, answer=["3", "3"]) == [False, True]


def test_a_reader_gets_only_the_columns_it_takes():
    def my_reward(completions, **kwargs):
        return [0.0] * len(completions)

    my_reward.extract_answer = lambda text: text or None  # the text alone
    assert rewards.unreadable(my_reward, ["42", ""], answer=["42", "7"], **trl_kwargs(2)) == [False, True]
    my_reward.extract_answer = lambda text, answer: text if answer in text else None  # one column, by name
    assert rewards.unreadable(my_reward, ["42", "41"], answer=["42", "7"], **trl_kwargs(2)) == [False, True]


def test_unreadable_is_none_for_a_function_without_an_extractor():
    def my_reward(completions, **kwargs):
        return [0.0] * len(completions)

    assert rewards.unreadable(my_reward, ["anything"]) is None


def test_registered_reader_is_the_functions_attribute():
    try:
        func = register_reward("tagged_test", answer_format="<answer> tags", extract_answer=lambda text, **c: None)(
            lambda completions, **kwargs: [0.0] * len(completions)
        )
        assert func.answer_format == "<answer> tags" and rewards.unreadable(func, ["x", "y"]) == [True, True]
    finally:
        rewards._registry._REGISTRY.pop("tagged_test", None)
