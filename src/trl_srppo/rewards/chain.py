# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The verifier of the chain task (the `chain` task of `trl_srppo.tasks.registry`, the CPU toy family of
`trl_srppo.tasks.toy` used by the tests, the CPU recipe, `make demo` and `make bench`): is the completion exactly the
chain's running values?

A chain is a start digit followed by steps, each an operator and a digit, then `=`; the answer is the running value
after every step:

    chain   7 max 5 min 3 max 9 =        answer  7 3 9
    chain   7 + 5 * 3 - 9 =              answer  2 6 7      (`+ - *` mod 10)
"""

from trl_srppo.rewards._registry import register_reward
from trl_srppo.rewards._text import completion_text

OPERATORS = ("+", "-", "*", "max", "min")
ANSWER_FORMAT = "the running values alone, digits separated by spaces, e.g. 7 3 9"


def apply_step(value: int, operator: str, digit: int) -> int:
    """One step of the chain: `(value operator digit) mod 10`, or the running max / min."""
    if operator == "+":
        return (value + digit) % 10
    if operator == "-":
        return (value - digit) % 10
    if operator == "*":
        return (value * digit) % 10
    if operator == "max":
        return max(value, digit)
    if operator == "min":
        return min(value, digit)
    raise ValueError(f"unknown operator {operator!r}; expected one of {OPERATORS}")


def solve(chain: str) -> str:
    """The gold answer (running values separated by spaces) of a chain such as `"7 + 5 * 3 ="`; a `ValueError` that
    says why for anything else."""
    words = chain.split()
    if len(words) < 4 or words[-1] != "=" or len(words) % 2 != 0:
        raise ValueError(f"not a chain prompt: {chain!r}")
    if not all(len(w) == 1 and w.isdigit() for w in words[0:-1:2]):
        raise ValueError(f"not a chain prompt (a digit is expected before each operator and at the end): {chain!r}")
    value = int(words[0])
    answer = []
    for operator, digit in zip(words[1:-1:2], words[2:-1:2], strict=True):
        value = apply_step(value, operator, int(digit))
        answer.append(str(value))
    return " ".join(answer)


def extract_answer(text: str, **columns) -> str | None:
    """The answer the ``chain`` reward reads: the completion's words when every one is a digit (joined by single
    spaces), else None. Dataset ``columns`` are accepted and unused."""
    words = text.split()
    return " ".join(words) if words and all(len(w) == 1 and w.isdigit() for w in words) else None


@register_reward("chain", answer_format=ANSWER_FORMAT, extract_answer=extract_answer)
def chain_reward(completions, answer, **kwargs) -> list[float]:
    """1.0 when the completion's words are exactly the gold running values, else 0.0.

    Completions are strings or conversational message lists (read by `completion_text`)."""
    return [
        1.0 if completion_text(completion).split() == str(gold).split() else 0.0
        for completion, gold in zip(completions, answer, strict=True)
    ]
