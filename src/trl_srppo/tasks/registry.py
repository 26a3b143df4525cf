# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The verifiable tasks: their fields, prompt templates, row checks, verifiers, and what counts as correct.

The one definition of a task, shared by training (`trl_srppo.tasks.data`), evaluation
(`trl_srppo.evaluation.benchmarks`, where a benchmark is a task plus where its rows come from), the analyses and the
benchmarks, so a model is trained and
evaluated on the same prompt format, the same row checks and the same verifier, and a sample is "correct" by one rule:
[`is_correct`], with the threshold [`CORRECT_THRESHOLD`].
"""

import math
import numbers
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

# A sample is correct when its reward is at least this. Every verifier of `trl_srppo.rewards` returns 1.0 for a
# correct answer and 0.0 otherwise; a reward function that adds a bonus or gives partial credit counts as correct
# only at full credit. Evaluation (pass@k), the analyses (difficulty bins, critic quality) and the benchmarks use it.
CORRECT_THRESHOLD = 1.0


def is_correct(reward: float | None) -> bool:
    """Whether a sample with this reward is correct: `reward >= CORRECT_THRESHOLD` (`None` and NaN, an unscorable
    sample, are not correct)."""
    return reward is not None and not math.isnan(reward) and reward >= CORRECT_THRESHOLD


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


def _short(value: Any) -> str:
    """`repr(value)`, cut to 60 characters for an error message."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _describe(value: Any) -> str:
    """A value as an error message shows it: its type and a short repr."""
    return f"{type(value).__name__} {_short(value)}"


def _text(row: dict[str, Any], name: str) -> str:
    """Field `name` as stripped, non-empty text. Only strings are text: `str()` of another value (a list, a bool)
    would put its repr in the prompt, or make it a gold answer, without anyone noticing."""
    value = row.get(name)
    if value is None:
        raise MalformedRow(f"field {name!r} is missing or empty")
    if not isinstance(value, str):
        raise MalformedRow(f"field {name!r} must be text (a string), got {_describe(value)}")
    if not value.strip():
        raise MalformedRow(f"field {name!r} is missing or empty")
    return value.strip()


def _integer(value: Any) -> int | None:
    """`value` as an `int` when it is a whole number: an integer, or a float without a fractional part (how Arrow and
    pandas store an integer column with missing values); `None` for anything else, so that a fraction is never
    truncated and text is never split into digits. Booleans are not numbers here."""
    if isinstance(value, bool):
        return None
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real) and math.isfinite(value) and float(value).is_integer():
        return int(value)
    return None


def _answer_text(row: dict[str, Any], name: str) -> str:
    """A gold answer as text: a string, or a whole number written as one (Hub datasets such as MathArena's store AIME
    answers as integers). A fractional float is refused: it is often an approximation of the intended answer (1/3
    stored as 0.3333333333333333), which the verifier would then require of the model."""
    value = row.get(name)
    if value is None or isinstance(value, str):
        return _text(row, name)
    integer = _integer(value)
    if integer is None:
        fractional = isinstance(value, numbers.Real) and not isinstance(value, bool)
        hint = '; give a fractional answer as text (e.g. "1/3" or "0.5")' if fractional else ""
        raise MalformedRow(f"field {name!r} must be text or a whole number, got {_describe(value)}{hint}")
    return str(integer)


def _prepare_math(row: dict[str, Any]) -> dict[str, Any]:
    return {"problem": _text(row, "problem"), "answer": _answer_text(row, "answer")}


def _prepare_countdown(row: dict[str, Any]) -> dict[str, Any]:
    nums, target = row.get("nums"), row.get("target")
    if nums is None or target is None:
        raise MalformedRow("fields 'nums' (a list of integers) and 'target' (an integer) are required")
    # A list only: a string such as "357" is not read as the digits 3, 5, 7.
    if not isinstance(nums, list | tuple):
        raise MalformedRow(f"field 'nums' must be a list of integers, got {_describe(nums)}")
    integers = [_integer(x) for x in nums]
    wrong = [x for x, integer in zip(nums, integers, strict=True) if integer is None]
    if wrong:
        raise MalformedRow(f"field 'nums' must hold integers only, got {_describe(wrong[0])} in {_short(nums)}")
    if _integer(target) is None:
        raise MalformedRow(f"field 'target' must be an integer, got {_describe(target)}")
    if len(integers) < 2:
        raise MalformedRow(f"field 'nums' needs at least two numbers, got {integers}")
    return {"nums": integers, "target": _integer(target), "nums_text": str(integers)}


def _prepare_knights_knaves(row: dict[str, Any]) -> dict[str, Any]:
    quiz = _text(row, "quiz")
    names, solution = row.get("names"), row.get("solution")
    if not isinstance(names, list | tuple) or not isinstance(solution, list | tuple) or len(names) != len(solution):
        raise MalformedRow("fields 'names' and 'solution' must be lists of the same length (solution: True = knight)")
    if not names or not all(isinstance(x, bool) for x in solution):
        raise MalformedRow("field 'solution' must hold one boolean per person (True = knight)")
    if not all(isinstance(n, str) and n.strip() for n in names):
        raise MalformedRow(f"field 'names' must hold one non-empty name (a string) per person, got {_short(names)}")
    return {"quiz": quiz, "names": list(names), "solution": list(solution)}


GPQA_SHUFFLE_SEED = 0
LETTERS = "ABCDEFGHIJ"


def _prepare_multiple_choice(row: dict[str, Any]) -> dict[str, Any]:
    question = _text(row, "question")
    options = [_text(row, name) for name in ("correct", "incorrect_1", "incorrect_2", "incorrect_3")]
    order = list(range(len(options)))
    # A fixed permutation per question: seeded by a constant and the row's identifier (its question when it has none;
    # string seeds are hashed with SHA-512 by `random`, so the order depends neither on PYTHONHASHSEED nor on the
    # position in the file).
    key = row.get("id")
    random.Random(f"gpqa-{GPQA_SHUFFLE_SEED}-{question if key is None else key}").shuffle(order)
    choices = "\n".join(f"{LETTERS[slot]}) {options[index]}" for slot, index in enumerate(order))
    return {"question": question, "choices_text": choices, "answer": LETTERS[order.index(0)]}


def _prepare_arithmetic(row: dict[str, Any]) -> dict[str, Any]:
    from ..rewards.number import parse_number

    answer = _answer_text(row, "answer")
    if parse_number(answer) is None:
        raise MalformedRow(f"field 'answer' must be a number such as 12, -3 or 2.5, got {_short(answer)}")
    return {"problem": _text(row, "problem"), "answer": answer}


def _prepare_chain(row: dict[str, Any]) -> dict[str, Any]:
    from ..rewards.chain import solve

    chain, answer = " ".join(_text(row, "chain").split()), " ".join(_text(row, "answer").split())
    try:
        gold = solve(chain)
    except ValueError as err:
        raise MalformedRow(f"field 'chain': {err}") from None
    if answer != gold:
        raise MalformedRow(f"field 'answer' must be the chain's running values {gold!r}, got {answer!r}")
    return {"chain": chain, "answer": answer}


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

    A row goes through `prepare`, then `render` (the user message); completions are checked by `score` (the reward
    function `reward`) and a reward counts as correct by [`is_correct`].
    """

    name: str
    fields: tuple[str, ...]
    prompt_template: str
    prepare: Callable[[dict[str, Any]], dict[str, Any]]
    reward: str
    reward_columns: tuple[str, ...]

    def render(self, prepared: dict[str, Any]) -> str:
        """The user message of a prepared row."""
        return self.prompt_template.format(**prepared)

    def score(
        self,
        prompts: Sequence[Any],
        completions: Sequence[Any],
        columns: Sequence[dict[str, Any]],
        reward_func: Callable | None = None,
    ) -> list[float | None]:
        """Check completions with the task's verifier.

        Args:
            prompts (sequence):
                The prompt of each completion.
            completions (sequence):
                The completions (strings or conversational messages).
            columns (sequence of `dict`):
                Each completion's prepared row (at least the `reward_columns`).
            reward_func (`Callable`, *optional*):
                The verifier, when already looked up; defaults to `trl_srppo.rewards.get_reward_func(self.reward)`.

        Returns:
            `list[float | None]`: one reward per completion (`None` when the verifier abstains).
        """
        if reward_func is None:
            from ..rewards import get_reward_func

            reward_func = get_reward_func(self.reward)
        kwargs = {name: [row[name] for row in columns] for name in self.reward_columns}
        rewards = reward_func(prompts=list(prompts), completions=list(completions), **kwargs)
        return [None if r is None else float(r) for r in rewards]

    @staticmethod
    def is_correct(reward: float | None) -> bool:
        """See the module-level [`is_correct`]."""
        return is_correct(reward)


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
    # Four-option multiple choice (GPQA's columns); the options are shuffled with a fixed seed per question.
    "multiple_choice": Task(
        "multiple_choice",
        ("question", "correct", "incorrect_1", "incorrect_2", "incorrect_3"),
        MULTIPLE_CHOICE_PROMPT,
        _prepare_multiple_choice,
        "multiple_choice",
        ("answer",),
    ),
    # Short problems with a numeric answer, verified by `number` (the number after the last "=" / "is"): the form a
    # small chat model answers in without \boxed{} (`make bench-real`'s task).
    "arithmetic": Task("arithmetic", ("problem", "answer"), "{problem}", _prepare_arithmetic, "number", ("answer",)),
    # Chains of digit operations ("7 max 5 min 3 =" -> "7 3"): the CPU toy family of `trl_srppo.tasks.toy` (the tests,
    # the CPU recipe, whose files `python -m trl_srppo.tasks.toy` writes), `make demo` and `make bench`.
    "chain": Task("chain", ("chain", "answer"), "{chain}", _prepare_chain, "chain", ("answer",)),
}


def get_task(name: str) -> Task:
    if name not in TASKS:
        raise ValueError(f"Unknown task {name!r}; choose one of {sorted(TASKS)}.")
    return TASKS[name]
