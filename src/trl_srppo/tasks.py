# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The verifiable tasks: their fields, prompt templates, row checks and reward functions.

Shared by training (`trl_srppo.data`) and evaluation (`trl_srppo.evaluation.benchmarks`), so a model is trained and
evaluated on the same prompt format and scored by the same verifier.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

MATH_PROMPT = "{problem}\n\nPlease reason step by step, and put your final answer within \\boxed{{}}."

COUNTDOWN_PROMPT = (
    "Using the numbers {nums_text}, create an equation that equals {target}. You can use basic arithmetic operations "
    "(+, -, *, /) and each number must be used exactly once. Show your reasoning, then give the final equation inside "
    "<answer> </answer> tags, for example <answer> (1 + 2) / 3 </answer>."
)

KNIGHTS_KNAVES_PROMPT = (
    "{quiz}\n\nReason step by step, then give your final answer inside <answer> </answer> tags, with one line per "
    "inhabitant in the order they were introduced, for example:\n<answer>\n(1) Alice is a knight\n(2) Bob is a knave\n"
    "</answer>"
)

MULTIPLE_CHOICE_PROMPT = (
    "Answer the following multiple choice question. Think step by step, then give the letter of the correct option "
    "within \\boxed{{}}, for example \\boxed{{A}}.\n\n{question}\n\n{choices_text}"
)


class MalformedRow(ValueError):
    """A dataset row that cannot become a training example; the message says which field is wrong and why."""


def _text(row: dict[str, Any], name: str) -> str:
    value = row.get(name)
    if value is None or not str(value).strip():
        raise MalformedRow(f"field {name!r} is missing or empty")
    return str(value).strip()


def _prepare_math(row: dict[str, Any]) -> dict[str, Any]:
    return {"problem": _text(row, "problem"), "answer": _text(row, "answer")}


def _prepare_countdown(row: dict[str, Any]) -> dict[str, Any]:
    nums, target = row.get("nums"), row.get("target")
    try:
        nums = [int(x) for x in nums]
        target = int(target)
    except (TypeError, ValueError) as err:
        raise MalformedRow(
            f"fields 'nums' (a list of integers) and 'target' (an integer) are required: {err}"
        ) from err
    if len(nums) < 2:
        raise MalformedRow(f"field 'nums' needs at least two numbers, got {nums}")
    return {"nums": nums, "target": target, "nums_text": str(nums)}


def _prepare_knights_knaves(row: dict[str, Any]) -> dict[str, Any]:
    quiz = _text(row, "quiz")
    names, solution = row.get("names"), row.get("solution")
    if not isinstance(names, list | tuple) or not isinstance(solution, list | tuple) or len(names) != len(solution):
        raise MalformedRow("fields 'names' and 'solution' must be lists of the same length (solution: True = knight)")
    if not names or not all(isinstance(x, bool) for x in solution):
        raise MalformedRow("field 'solution' must hold one boolean per person (True = knight)")
    return {"quiz": quiz, "names": [str(n) for n in names], "solution": list(solution)}


def _prepare_toy(row: dict[str, Any]) -> dict[str, Any]:
    digits, answer = _text(row, "digits").split(), _text(row, "answer")
    if not all(len(d) == 1 and d.isdigit() for d in digits):
        raise MalformedRow(f"field 'digits' must be single digits separated by spaces, got {row['digits']!r}")
    if answer != digits[-1]:
        raise MalformedRow(f"field 'answer' must be the last digit {digits[-1]!r}, got {answer!r}")
    return {"digits": " ".join(digits), "answer": answer}


@dataclass(frozen=True)
class Task:
    """A verifiable task.

    Args:
        name (`str`):
            Registry name.
        fields (`tuple[str, ...]`):
            Canonical fields a source row must provide (after column renaming).
        prompt_template (`str`):
            `str.format` template of the user message, filled with the prepared row.
        prepare (`Callable[[dict], dict]`):
            Checks a row and returns its prepared fields; raises [`MalformedRow`] with the reason.
        reward (`str`):
            Name of the reward function in `trl_srppo.rewards`.
        reward_columns (`tuple[str, ...]`):
            Prepared fields the reward function reads.
    """

    name: str
    fields: tuple[str, ...]
    prompt_template: str
    prepare: Callable[[dict[str, Any]], dict[str, Any]]
    reward: str
    reward_columns: tuple[str, ...]


TASKS: dict[str, Task] = {
    "math": Task("math", ("problem", "answer"), MATH_PROMPT, _prepare_math, "math", ("answer",)),
    "countdown": Task(
        "countdown", ("nums", "target"), COUNTDOWN_PROMPT, _prepare_countdown, "countdown", ("nums", "target")
    ),
    "knights_knaves": Task(
        "knights_knaves",
        ("quiz", "names", "solution"),
        KNIGHTS_KNAVES_PROMPT,
        _prepare_knights_knaves,
        "knights_knaves",
        ("names", "solution"),
    ),
    # The CPU toy task of `trl_srppo.toy` ("repeat the last digit"), files written by `python -m trl_srppo.toy`.
    "toy": Task("toy", ("digits", "answer"), "{digits}", _prepare_toy, "last_digit", ("answer",)),
}


def get_task(name: str) -> Task:
    if name not in TASKS:
        raise ValueError(f"Unknown task {name!r}; choose one of {sorted(TASKS)}.")
    return TASKS[name]
